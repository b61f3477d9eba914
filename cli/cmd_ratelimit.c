/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cmd_ratelimit.c - edgectl ratelimit set|off: per-source token buckets
 * for new connections (a TCP SYN, a QUIC Initial to a guarded port) and
 * for every IP packet.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "ctlutil.h"

static int rl_apply_maps(struct ctl *c, const void *arg, struct errbuf *err)
{
	int ret = pins_config_write(&c->pins, &c->st);

	(void)arg;
	if (ret)
		errbuf_set(err, "cannot write the rate limits to %s: %s",
			   c->pin_dir, strerror(-ret));
	return ret;
}

static int rl_apply(struct ctl *c)
{
	int ret = ctl_change(c, rl_apply_maps, NULL);

	if (ret)
		return ret;
	if (!c->attached)
		log_note("edge is not attached; saved and applied at attach");
	return CTL_OK;
}

static int rl_set(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"burst", required_argument, NULL, 'b'},
	    {"packets", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct errbuf err = {""};
	const char *burst_arg = NULL;
	struct policy_rl rl = {0, 0};
	struct edge_rl_conf conf;
	char rate[32];
	bool packets = false;
	int o, ret;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "ratelimit set")) !=
	       -1) {
		switch (o) {
		case 'b':
			burst_arg = optarg;
			break;
		case 'p':
			packets = true;
			break;
		case 'h':
			return ctl_usage_print("ratelimit set");
		default:
			return CTL_USAGE;
		}
	}
	if (optind >= argc)
		return ctl_usage_error("ratelimit set",
				       "ratelimit set: missing RATE");
	if (optind + 1 < argc)
		return ctl_usage_error(
		    "ratelimit set", "ratelimit set: unexpected argument '%s'",
		    argv[optind + 1]);
	if (policy_rate_parse(argv[optind], &rl.rate, &err))
		return ctl_usage_error("ratelimit set", "bad RATE: %s",
				       err.msg);
	rl.burst = policy_burst_default(rl.rate);
	if (burst_arg && policy_burst_parse(burst_arg, &rl.burst, &err))
		return ctl_usage_error("ratelimit set", "bad --burst: %s",
				       err.msg);
	if (policy_rl_conf(&rl, &conf))
		return ctl_usage_error("ratelimit set",
				       "rate or burst out of range");

	ret = ctl_begin(c, CTL_WRITE | CTL_BPFFS);
	if (ret)
		return ret;
	if (packets)
		c->st.pkt = rl;
	else
		c->st.syn = rl;
	ret = rl_apply(c);
	if (ret)
		return ret;
	policy_rate_format(rl.rate, rate, sizeof(rate));
	printf("rate limit for %s: %s per source, burst %llu\n",
	       packets ? "packets" : "new connections (TCP SYN, QUIC Initial)",
	       rate, (unsigned long long)rl.burst);
	return CTL_OK;
}

static int rl_off(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"syn", no_argument, NULL, 's'},
	    {"packets", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool syn = false, packets = false;
	int o, ret;

	optind = 0;
	while ((o = ctl_getopt(argc, argv, ":h", opts, "ratelimit off")) !=
	       -1) {
		switch (o) {
		case 's':
			syn = true;
			break;
		case 'p':
			packets = true;
			break;
		case 'h':
			return ctl_usage_print("ratelimit off");
		default:
			return CTL_USAGE;
		}
	}
	if (optind < argc)
		return ctl_usage_error(
		    "ratelimit off", "ratelimit off: unexpected argument '%s'",
		    argv[optind]);
	if (!syn && !packets)
		syn = packets = true;
	ret = ctl_begin(c, CTL_WRITE | CTL_BPFFS);
	if (ret)
		return ret;
	if (syn)
		memset(&c->st.syn, 0, sizeof(c->st.syn));
	if (packets)
		memset(&c->st.pkt, 0, sizeof(c->st.pkt));
	ret = rl_apply(c);
	if (ret)
		return ret;
	printf("rate limit off for %s\n",
	       syn && packets ? "new connections and packets"
	       : syn	      ? "new connections (TCP SYN, QUIC Initial)"
			      : "packets");
	return CTL_OK;
}

int cmd_ratelimit(struct ctl *c, int argc, char **argv)
{
	if (argc < 2)
		return ctl_usage_error("ratelimit",
				       "ratelimit: missing subcommand (set, "
				       "off)");
	if (strcmp(argv[1], "set") == 0)
		return rl_set(c, argc - 1, argv + 1);
	if (strcmp(argv[1], "off") == 0)
		return rl_off(c, argc - 1, argv + 1);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return ctl_usage_print("ratelimit");
	return ctl_usage_error("ratelimit",
			       "ratelimit: unknown subcommand '%s'", argv[1]);
}
