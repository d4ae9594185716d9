# SPDX-License-Identifier: Apache-2.0
SUMMARY = "Health agent of a dstack confidential VM"
DESCRIPTION = "dstack-healthd answers the dstack gateway's question: can this \
instance serve? A refresh thread recomputes a verdict every 5 s from the \
healthchecks of the app's Compose containers (Docker Engine API or nerdctl) \
or from a status file the app writes; a libmicrohttpd thread serves it as \
pRPC at /prpc/v1/Health on port 8090."
SECTION = "admin"
LICENSE = "Apache-2.0"
LIC_FILES_CHKSUM = "file://LICENSE;md5=3b83ef96387f14655fc854ddc3c6bd57"

# The layer that carries this recipe pins the source: the git URL of this
# repository in DSTACK_HEALTHD_GIT (a git:// URL with protocol= and branch=)
# and the commit in SRCREV. Without them the recipe is skipped, not an error.
DSTACK_HEALTHD_GIT ??= ""
SRC_URI = "${DSTACK_HEALTHD_GIT}"
python () {
    if not d.getVar('DSTACK_HEALTHD_GIT'):
        raise bb.parse.SkipRecipe("set DSTACK_HEALTHD_GIT and SRCREV to the dstack-healthd repository and commit")
}
PV = "0.1.0+git"
# No S: since wrynose, bitbake.conf's S is where the git fetcher unpacks, and
# do_unpack refuses a recipe that still sets S to ${WORKDIR}/git.

# The five libraries (jsmn is header-only, mbedtls has no .pc file and is
# linked by name), and protoc-c for the build machine: the .c it generates
# from rpc/*.proto and probe/*.proto is the same for every target.
# libmicrohttpd and systemd come from openembedded-core, protobuf-c from
# meta-oe, mbedtls from meta-networking; no layer has jsmn, so jsmn_1.1.0.bb
# is shipped beside this recipe (README.md here). The source builds against
# mbedtls 2.28 and 3.6.
DEPENDS = "libmicrohttpd protobuf-c jsmn mbedtls systemd protobuf-c-native"

inherit pkgconfig systemd

# The Makefile adds the project's own flags (-std=c11, warnings, hardening,
# PIE) to these rather than replacing them, makes no warning an error unless
# WERROR=1, and never installs or fetches anything: do_compile and do_install
# need no network. tests/e2e/cross.sh drives it the same way.
EXTRA_OEMAKE = "\
    CC='${CC}' AR='${AR}' \
    CFLAGS='${CFLAGS}' CPPFLAGS='${CPPFLAGS}' LDFLAGS='${LDFLAGS}' \
    PKG_CONFIG='pkg-config' PROTOC_C='protoc-c' \
    BUILD='${B}/build' \
    PREFIX='${prefix}' SBINDIR='${sbindir}' MANDIR='${mandir}' \
    DOCDIR='${docdir}/${BPN}' DATADIR='${datadir}/${BPN}' \
    SYSTEMDUNITDIR='${systemd_system_unitdir}' \
"

# The daemon only: the unit test binaries are for the build machine.
do_compile() {
    oe_runmake '${B}/build/dstack-healthd'
}

do_install() {
    oe_runmake install DESTDIR='${D}'
}

# The three units are enabled, as the Debian package does: the socket holds
# port 8090 from early boot and across restarts of the agent; the drain unit
# (WantedBy=app-compose.service) takes the instance out of rotation before
# the app stops. A unit `make install` installs that is in no SYSTEMD_SERVICE
# is shipped by no package (tests/e2e/yocto.sh checks).
SYSTEMD_SERVICE:${PN} = "dstack-healthd.service dstack-healthd.socket dstack-healthd-drain.service"
SYSTEMD_AUTO_ENABLE:${PN} = "enable"

# ${PN}-front (docs/image-builder.md, "In a dstack guest image"): the agent as the front of
# port 8090, the guest agent's listener moved to 127.0.0.1:18090
# (/etc/dstack/dstack.toml) and the agent's config that relays to it
# (/etc/dstack/healthd.json). A package of its own, so that an image opts in
# by adding it to IMAGE_INSTALL beside dstack-guest; no unit of its own: the
# socket unit of ${PN} holds 8090 from early boot, and the relay connects per
# connection, so the guest agent may start later (until it listens, relayed
# connections get 502 and Health is answered).
EXTRA_OEMAKE += "SYSCONFDIR='${sysconfdir}'"
do_install:append() {
    oe_runmake install-front DESTDIR='${D}'
}
PACKAGES =+ "${PN}-front"
FILES:${PN}-front = "${sysconfdir}/dstack/dstack.toml ${sysconfdir}/dstack/healthd.json"
CONFFILES:${PN}-front = "${sysconfdir}/dstack/dstack.toml ${sysconfdir}/dstack/healthd.json"
RDEPENDS:${PN}-front = "${PN}"
