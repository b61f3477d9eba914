#!/bin/bash
# mkchain.sh DIR NAME DEPTH SANS: a certificate chain DEPTH intermediates
# deep, made with openssl (P-256 keys, valid for two days):
#   DIR/NAME-root.crt          the root CA (not in any chain file)
#   DIR/NAME.key               the leaf's key
#   DIR/NAME-N.pem, N=0..DEPTH the leaf (CN NAME, subjectAltName SANS,
#                              signed by the last intermediate), then the
#                              N intermediates above it, each signed by
#                              the next: a valid chain of N + 1
#                              certificates
# Exit status 0 when every file was made.
set -e
dir=$1 name=$2 depth=$3 sans=$4
ext="$dir/$name-ca.ext"
printf '%s\n' "basicConstraints=critical,CA:TRUE" \
	"keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
	"subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" >"$ext"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key "$dir/$name-root.key"
openssl req -x509 -new -key "$dir/$name-root.key" -days 2 -subj "/CN=$name-root" \
	-addext basicConstraints=critical,CA:TRUE \
	-addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature \
	-out "$dir/$name-root.crt" 2>/dev/null
# intermediates 1..DEPTH, i signed by i-1 (0: the root)
up="$dir/$name-root"
for ((i = 1; i <= depth; i++)); do
	key "$dir/$name-i$i.key"
	openssl req -new -key "$dir/$name-i$i.key" -subj "/CN=$name-i$i" \
		-out "$dir/$name-i$i.csr" 2>/dev/null
	openssl x509 -req -in "$dir/$name-i$i.csr" -CA "$up.crt" -CAkey "$up.key" \
		-CAcreateserial -days 2 -extfile "$ext" -out "$dir/$name-i$i.crt" 2>/dev/null
	up="$dir/$name-i$i"
done
# the leaf, signed by the last one
key "$dir/$name.key"
openssl req -new -key "$dir/$name.key" -subj "/CN=$name" \
	-addext "subjectAltName=$sans" -out "$dir/$name.csr" 2>/dev/null
openssl x509 -req -in "$dir/$name.csr" -CA "$up.crt" -CAkey "$up.key" \
	-CAcreateserial -days 2 -copy_extensions copy -out "$dir/$name.crt" 2>/dev/null
# the chain files: the leaf, then the N intermediates nearest it
for ((n = 0; n <= depth; n++)); do
	{
		cat "$dir/$name.crt"
		for ((i = depth; i > depth - n; i--)); do
			cat "$dir/$name-i$i.crt"
		done
	} >"$dir/$name-$n.pem"
done
chmod 644 "$dir/$name"*
