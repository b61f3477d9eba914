// SPDX-License-Identifier: BSD-2-Clause
/*
 * tls_db.c - the database's certificates (tls.h, "tls_db"): the rows of
 * the certificates table as the control plane reads them, each checked
 * alone (tls.c's tls_dbrow_check) before it is accepted; a refused row
 * is logged once per reason (by id, never key material) and counted, and
 * the version of it that was accepted before serves on. The store is
 * rebuilt from the accepted rows (tls_store_with_db).
 */
#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tls.h"
#include "tls_int.h"

void tls_dbrow_clear(struct tls_dbrow *r)
{
	free(r->id);
	free(r->label);
	free(r->names);
	if (r->key_pem) {
		OPENSSL_cleanse(r->key_pem, strlen(r->key_pem));
		free(r->key_pem);
	}
	free(r->chain_pem);
	free(r->ocsp);
	memset(r, 0, sizeof(*r));
}

void tls_dbrows_free(struct tls_dbrow *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		tls_dbrow_clear(&v[i]);
	free(v);
}

int tls_dbrow_copy(struct tls_dbrow *d, const struct tls_dbrow *r)
{
	memset(d, 0, sizeof(*d));
	d->id = strdup(r->id);
	d->label = strdup(r->label);
	d->names = strdup(r->names);
	d->chain_pem = strdup(r->chain_pem);
	d->key_pem = strdup(r->key_pem);
	d->ocsp_len = r->ocsp_len;
	if (r->ocsp_len) {
		d->ocsp = malloc(r->ocsp_len);
		if (d->ocsp)
			memcpy(d->ocsp, r->ocsp, r->ocsp_len);
	}
	if (!d->id || !d->label || !d->names || !d->chain_pem || !d->key_pem ||
	    (r->ocsp_len && !d->ocsp)) {
		tls_dbrow_clear(d);
		return -ENOMEM;
	}
	return 0;
}

bool tls_dbrow_same(const struct tls_dbrow *a, const struct tls_dbrow *b)
{
	return strcmp(a->id, b->id) == 0 && strcmp(a->names, b->names) == 0 &&
	       strcmp(a->chain_pem, b->chain_pem) == 0 &&
	       strcmp(a->key_pem, b->key_pem) == 0 &&
	       a->ocsp_len == b->ocsp_len &&
	       (!a->ocsp_len || memcmp(a->ocsp, b->ocsp, a->ocsp_len) == 0);
}

int tls_db_new(struct tls_db **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void tls_dbrej_free(struct tls_dbrej *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++) {
		free(v[i].id);
		free(v[i].msg);
	}
	free(v);
}

void tls_db_free(struct tls_db *db)
{
	if (!db)
		return;
	tls_dbrows_free(db->rows, db->n);
	tls_dbrej_free(db->rej, db->n_rej);
	free(db);
}

static int tls_hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (char)tolower((unsigned char)ch);
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* *r = in's row (its ocsp from hex). 0, -EINVAL (not hex), -ENOMEM. */
static int tls_dbrow_from(struct tls_dbrow *r, const struct tls_db_in *in)
{
	size_t n = strlen(in->ocsp_hex), i;
	struct tls_dbrow t = {0};
	char label[96];

	memset(r, 0, sizeof(*r));
	snprintf(label, sizeof(label), "certificates row %.40s", in->id);
	t.id = (char *)in->id;
	t.label = label;
	t.names = (char *)in->names;
	t.chain_pem = (char *)in->chain_pem;
	t.key_pem = (char *)in->key_pem;
	if (tls_dbrow_copy(r, &t))
		return -ENOMEM;
	if (n % 2)
		return -EINVAL;
	if (n) {
		r->ocsp = malloc(n / 2);
		if (!r->ocsp)
			return -ENOMEM;
		for (i = 0; i < n / 2; i++) {
			int hi = tls_hexval(in->ocsp_hex[2 * i]),
			    lo = tls_hexval(in->ocsp_hex[2 * i + 1]);

			if (hi < 0 || lo < 0)
				return -EINVAL;
			r->ocsp[i] = (unsigned char)(hi << 4 | lo);
		}
		r->ocsp_len = n / 2;
	}
	return 0;
}

static const struct tls_dbrow *tls_db_find(const struct tls_db *db,
					   const char *id)
{
	size_t i;

	for (i = 0; i < db->n; i++)
		if (strcmp(db->rows[i].id, id) == 0)
			return &db->rows[i];
	return NULL;
}

static const char *tls_db_rej_msg(const struct tls_db *db, const char *id)
{
	size_t i;

	for (i = 0; i < db->n_rej; i++)
		if (strcmp(db->rej[i].id, id) == 0)
			return db->rej[i].msg;
	return NULL;
}

int tls_db_update(struct tls_db *db, const struct tls_db_in *in, size_t n)
{
	struct tls_dbrow *rows = calloc(n + 1, sizeof(*rows)), r;
	struct tls_dbrej *rej = calloc(n + 1, sizeof(*rej));
	size_t n_rows = 0, n_rej = 0, i;
	struct errbuf err;
	bool changed;
	int rc = 0;

	if (!rows || !rej) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		const struct tls_dbrow *old = tls_db_find(db, in[i].id);
		const char *was;

		rc = tls_dbrow_from(&r, &in[i]);
		if (rc == -ENOMEM)
			goto out;
		if (rc == 0 && old && tls_dbrow_same(&r, old)) {
			rows[n_rows++] = r; /* as accepted before */
			continue;
		}
		if (rc)
			errbuf_set(&err, "%s ocsp: not hex", r.label);
		else
			rc = tls_dbrow_check(&r, &err);
		if (rc == -ENOMEM) {
			tls_dbrow_clear(&r);
			goto out;
		}
		if (rc == 0) {
			rows[n_rows++] = r;
			continue;
		}
		/* refused: said once per row and reason; what the row was
		 * while it was good serves on */
		rc = 0;
		was = tls_db_rej_msg(db, in[i].id);
		if (!was || strcmp(was, err.msg)) {
			db->refusals++;
			tls_count_db_refusal();
			log_warnx("tls: database certificate refused: %s; %s",
				  err.msg,
				  old ? "its previous certificate serves on"
				      : "not served");
		}
		rej[n_rej].id = strdup(in[i].id);
		rej[n_rej].msg = strdup(err.msg);
		if (!rej[n_rej].id || !rej[n_rej].msg) {
			free(rej[n_rej].id);
			free(rej[n_rej].msg);
			tls_dbrow_clear(&r);
			rc = -ENOMEM;
			goto out;
		}
		n_rej++;
		tls_dbrow_clear(&r);
		if (old) {
			rc = tls_dbrow_copy(&rows[n_rows], old);
			if (rc)
				goto out;
			n_rows++;
		}
	}
	changed = n_rows != db->n;
	for (i = 0; !changed && i < n_rows; i++)
		changed = !tls_dbrow_same(&rows[i], &db->rows[i]);
	tls_dbrows_free(db->rows, db->n);
	db->rows = rows;
	db->n = n_rows;
	tls_dbrej_free(db->rej, db->n_rej);
	db->rej = rej;
	db->n_rej = n_rej;
	tls_count_db(n_rows, n_rej);
	return changed ? 1 : 0;
out:
	tls_dbrows_free(rows, n_rows);
	tls_dbrej_free(rej, n_rej);
	return rc;
}

void tls_db_counts(const struct tls_db *db, size_t *served, size_t *refused,
		   uint64_t *refusals)
{
	*served = db ? db->n : 0;
	*refused = db ? db->n_rej : 0;
	*refusals = db ? db->refusals : 0;
}

json_t *tls_db_refused_json(const struct tls_db *db)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && db && i < db->n_rej; i++)
		json_array_append_new(a, json_pack("{s:s, s:s}", "id",
						   db->rej[i].id, "error",
						   db->rej[i].msg));
	return a;
}
