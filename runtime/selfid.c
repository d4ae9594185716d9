/* SPDX-License-Identifier: Apache-2.0 */
#include "runtime/selfid.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/readfile.h"

/* A container's mountinfo is some 40 lines; a host's can be thousands. */
#define SELFID_MOUNTINFO_MAX (1u << 20)

/* A field of a line: [p, p + n). */
struct span {
	const char *p;
	size_t n;
};

static bool span_is(struct span s, const char *lit)
{
	return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

static bool is_id(const char *p, size_t n)
{
	if (n != SELFID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

/* The path's last component, and the one before it (empty when none). */
static void last_two(struct span path, struct span *last, struct span *parent)
{
	size_t end = path.n;
	size_t i = end;
	while (i > 0 && path.p[i - 1] != '/')
		i--;
	*last = (struct span){ path.p + i, end - i };
	*parent = (struct span){ path.p, 0 };
	if (i == 0)
		return;
	size_t pend = i - 1, j = pend;
	while (j > 0 && path.p[j - 1] != '/')
		j--;
	*parent = (struct span){ path.p + j, pend - j };
}

/* A cgroup's last component names the container as "ID" (cgroupfs) or
 * "PREFIX-ID.scope" (the systemd driver: docker-, nerdctl-,
 * cri-containerd-). */
static bool cgroup_id(struct span root, struct span *id)
{
	struct span last, parent;
	last_two(root, &last, &parent);
	if (last.n > 6 && memcmp(last.p + last.n - 6, ".scope", 6) == 0)
		last.n -= 6;
	const char *dash = memrchr(last.p, '-', last.n);
	if (dash) {
		last.n -= (size_t)(dash + 1 - last.p);
		last.p = dash + 1;
	}
	*id = last;
	return is_id(last.p, last.n);
}

/* The runtime's own file for the container, bind-mounted: ".../ID/NAME". */
static bool file_id(struct span root, const char *name, struct span *id)
{
	struct span last, parent;
	last_two(root, &last, &parent);
	*id = parent;
	return span_is(last, name) && is_id(parent.p, parent.n);
}

/* One line's fields: root, mount point and file system type. False for a
 * line that is not in mountinfo's shape. */
static bool split(const char *p, size_t n, struct span *root, struct span *mnt, struct span *fstype)
{
	struct span f[6];
	size_t k = 0, i = 0;
	bool sep = false;
	while (i < n) {
		size_t j = i;
		while (j < n && p[j] != ' ')
			j++;
		struct span s = { p + i, j - i };
		if (k < 6)
			f[k] = s;
		else if (sep) {
			*fstype = s;
			*root = f[3];
			*mnt = f[4];
			return true;
		} else if (span_is(s, "-"))
			sep = true;
		k++;
		i = j + 1;
	}
	return false;
}

enum selfid_source selfid_parse(const char *text, size_t len, char id[SELFID_LEN + 1])
{
	static const struct {
		const char *mnt, *name;
		enum selfid_source src;
	} files[] = {
		{ "/etc/hostname", "hostname", SELFID_HOSTNAME },
		{ "/etc/hosts", "hosts", SELFID_HOSTS },
		{ "/etc/resolv.conf", "resolv.conf", SELFID_RESOLV },
	};
	enum selfid_source best = SELFID_NONE;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct span root, mnt, fstype, got;
		enum selfid_source src = SELFID_NONE;
		if (split(p, n, &root, &mnt, &fstype)) {
			if ((span_is(fstype, "cgroup") || span_is(fstype, "cgroup2")) &&
			    cgroup_id(root, &got))
				src = SELFID_CGROUP;
			for (size_t i = 0; !src && i < sizeof(files) / sizeof(files[0]); i++)
				if (span_is(mnt, files[i].mnt) && file_id(root, files[i].name, &got))
					src = files[i].src;
		}
		if (src && (!best || src < best)) {
			best = src;
			memcpy(id, got.p, SELFID_LEN);
			id[SELFID_LEN] = '\0';
		}
		p += n + 1;
	}
	return best;
}

enum selfid_source selfid_read(char id[SELFID_LEN + 1])
{
	char *text = NULL;
	size_t len = 0;
	struct errbuf err = { "" };
	if (readfile("/proc/self/mountinfo", SELFID_MOUNTINFO_MAX, &text, &len, &err) < 0)
		return SELFID_NONE;
	enum selfid_source s = selfid_parse(text, len, id);
	free(text);
	return s;
}

const char *selfid_source_name(enum selfid_source s)
{
	switch (s) {
	case SELFID_CGROUP:
		return "its cgroup";
	case SELFID_HOSTNAME:
		return "its /etc/hostname mount";
	case SELFID_HOSTS:
		return "its /etc/hosts mount";
	case SELFID_RESOLV:
		return "its /etc/resolv.conf mount";
	case SELFID_NONE:
		break;
	}
	return "its hostname";
}
