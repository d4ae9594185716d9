/* SPDX-License-Identifier: Apache-2.0 */
/* The own container's id from mountinfo (runtime/selfid.h), as a table of
 * mountinfo texts. The Docker lines are real: Debian 12's docker.io
 * (20.10.24) on a private data root (the tests' dockerd), cgroup v1, a
 * container with `--network none`, one with `--hostname custom`, one that
 * joined the first one's network, one with `--cgroupns private`; the data
 * root rewritten to Debian's /var/lib/docker where noted. The nerdctl and
 * cgroup v2 lines follow the layouts their sources document (nerdctl
 * docs/dir.md: DATAROOT/ADDRHASH/containers/NS/ID/{hostname,resolv.conf},
 * DATAROOT/ADDRHASH/etchosts/NS/ID/hosts; systemd's docker-ID.scope). */
#include <stdio.h>
#include <string.h>

#include "runtime/selfid.h"
#include "tests/lib/tap.h"

#define A "1a34191cce89423d41d2c04661171bbb5991f6ae89f0de574d8dcce43af7bb20"
#define B "81bbe500830525d5a99e06a0653227abf0e2ddef8e99749ee331dd3577dfb11a"
#define C "df20a223fe939ec4dfd95f6876e00e83b4c9a6f476c4693b381bdb4e10cece9c"
#define N "c4ed811cc361d26faffdee8d696ddbc45a9d93c571b5b3c54d3da01cb29caeb1"

/* Lines every container has, naming nothing. */
#define ROOTFS "395 236 0:133 / / rw,relatime master:16 - overlay overlay rw,lowerdir=/tmp/dh.t0IyoY/data/overlay2/l/VNOMFN7FRKACDGPZLEJ4KO2C2T,upperdir=/tmp/dh.t0IyoY/data/overlay2/ef10268cd286715eefcf5404ac86a338d851264b89627f6567e9ccdb0f9a272b/diff,workdir=/tmp/dh.t0IyoY/data/overlay2/ef10268cd286715eefcf5404ac86a338d851264b89627f6567e9ccdb0f9a272b/work\n" \
	"396 395 0:154 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n" \
	"411 397 0:180 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k\n"
#define ETC(id, root)                                                                          \
	"412 395 254:0 " root "/containers/" id "/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw,discard\n" \
	"431 395 254:0 " root "/containers/" id "/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw,discard\n" \
	"437 395 254:0 " root "/containers/" id "/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw,discard\n"
#define CGROUP_V1(path) \
	"401 400 0:29 " path " /sys/fs/cgroup/cpu ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu\n" \
	"404 400 0:32 " path " /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory\n"
#define CGROUP_V2(path) \
	"400 399 0:30 " path " /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate\n"

static const struct {
	const char *name, *text;
	enum selfid_source want;
	const char *id;
} cases[] = {
	{ "docker 20.10, cgroup v1: the cgroup names it", ROOTFS CGROUP_V1("/docker/" A) ETC(A, "/tmp/dh.t0IyoY/data"),
	  SELFID_CGROUP, A },
	{ "docker, cgroup v2 private namespace: the /etc/hostname mount",
	  ROOTFS CGROUP_V2("/") ETC(A, "/var/lib/docker"), SELFID_HOSTNAME, A },
	{ "a data root on its own file system: the root is relative to it",
	  ROOTFS CGROUP_V2("/") ETC(B, ""), SELFID_HOSTNAME, B },
	{ "--hostname custom changes no mount", ROOTFS CGROUP_V1("/") ETC(B, "/var/lib/docker"),
	  SELFID_HOSTNAME, B },
	{ "joined another's network: its files, but the own cgroup first",
	  ROOTFS CGROUP_V1("/docker/" C) ETC(A, "/tmp/dh.t0IyoY/data"), SELFID_CGROUP, C },
	{ "joined another's network, cgroup v2 private: the other's (docs: a known limit)",
	  ROOTFS CGROUP_V2("/") ETC(A, "/var/lib/docker"), SELFID_HOSTNAME, A },
	{ "cgroup v2, host namespace, systemd driver",
	  ROOTFS CGROUP_V2("/system.slice/docker-" A ".scope"), SELFID_CGROUP, A },
	{ "nerdctl: containers/NS/ID/hostname",
	  ROOTFS CGROUP_V2("/")
	  "500 395 254:0 /var/lib/nerdctl/1935db59/containers/default/" N "/hostname /etc/hostname rw - ext4 /dev/vda rw\n",
	  SELFID_HOSTNAME, N },
	{ "nerdctl: etchosts/NS/ID/hosts alone",
	  ROOTFS "501 395 254:0 /var/lib/nerdctl/1935db59/etchosts/dstack/" N "/hosts /etc/hosts rw - ext4 /dev/vda rw\n",
	  SELFID_HOSTS, N },
	{ "nerdctl, cgroup v1, cgroupfs: /NAMESPACE/ID", ROOTFS CGROUP_V1("/default/" N), SELFID_CGROUP, N },
	{ "nerdctl, systemd driver", ROOTFS CGROUP_V2("/system.slice/nerdctl-" N ".scope"),
	  SELFID_CGROUP, N },
	{ "resolv.conf alone", ROOTFS "412 395 254:0 /var/lib/docker/containers/" A "/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw\n",
	  SELFID_RESOLV, A },
	{ "optional fields before the separator",
	  "431 395 254:0 /var/lib/docker/containers/" A "/hostname /etc/hostname rw,relatime shared:5 master:1 - ext4 /dev/vda rw\n",
	  SELFID_HOSTNAME, A },
	{ "a host: nothing names a container",
	  "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
	  "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	  "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n",
	  SELFID_NONE, NULL },
	{ "a host's process in a cgroup not named by an id",
	  "35 31 0:32 /process_api/5108bb27fdcbd38528aecd1f6b347787 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
	  SELFID_NONE, NULL },
	{ "podman's layout is not taken (userdata/hostname)",
	  "431 395 254:0 /var/lib/containers/storage/overlay-containers/" A "/userdata/hostname /etc/hostname rw - ext4 /dev/vda rw\n",
	  SELFID_NONE, NULL },
	{ "an id-named folder bound elsewhere is not the container's",
	  "431 395 254:0 /var/lib/docker/containers/" A "/hostname /mnt/hostname rw - ext4 /dev/vda rw\n"
	  "432 395 254:0 /data/" A " /data rw - ext4 /dev/vda rw\n",
	  SELFID_NONE, NULL },
	{ "an id one digit short", ROOTFS CGROUP_V1("/docker/" "1a34191cce89423d41d2c04661171bbb5991f6ae89f0de574d8dcce43af7bb2"),
	  SELFID_NONE, NULL },
	{ "upper-case hex is not an id", ROOTFS CGROUP_V1("/docker/" "1A34191CCE89423D41D2C04661171BBB5991F6AE89F0DE574D8DCCE43AF7BB20"),
	  SELFID_NONE, NULL },
	{ "a line cut before its separator",
	  "431 395 254:0 /var/lib/docker/containers/" A "/hostname /etc/hostname rw,relatime", SELFID_NONE,
	  NULL },
	{ "no final newline", "431 395 254:0 /var/lib/docker/containers/" A "/hostname /etc/hostname rw - ext4 /dev/vda rw",
	  SELFID_HOSTNAME, A },
	{ "empty", "", SELFID_NONE, NULL },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char id[SELFID_LEN + 1] = "";
		enum selfid_source s = selfid_parse(cases[i].text, strlen(cases[i].text), id);
		is_int(s, cases[i].want, "%s: %s", cases[i].name, selfid_source_name(s));
		if (cases[i].id)
			is_str(id, cases[i].id, "%s: the id", cases[i].name);
	}
	/* Not NUL-terminated: only len bytes are read. */
	static const char cut[] = "431 395 254:0 /var/lib/docker/containers/" A "/hostname /etc/hostname rw - ext4 x y\nJUNK";
	char id[SELFID_LEN + 1] = "";
	is_int(selfid_parse(cut, sizeof(cut) - 5, id), SELFID_HOSTNAME, "len bounds the text");
	return done_testing();
}
