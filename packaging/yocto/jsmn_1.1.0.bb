# SPDX-License-Identifier: Apache-2.0
SUMMARY = "jsmn: a minimalistic JSON tokenizer in C, as one header"
DESCRIPTION = "Build dependency of dstack-healthd: no layer of Yocto wrynose \
(openembedded-core, meta-openembedded) has a jsmn recipe. Upstream v1.1.0, \
whose jsmn.h is byte for byte the one Debian's libjsmn-dev ships."
HOMEPAGE = "https://github.com/zserge/jsmn"
SECTION = "devel"
LICENSE = "MIT"
# LICENSE, and the same MIT text at the top of the one file that is shipped.
LIC_FILES_CHKSUM = "file://LICENSE;md5=5adc94605a1f7a797a9a834adbe335e3 \
                    file://jsmn.h;beginline=1;endline=23;md5=c56db537a1570530f80115c3ad355575"

# v1.1.0 (a tag on master).
SRC_URI = "git://github.com/zserge/jsmn.git;protocol=https;branch=master"
SRCREV = "fdcef3ebf886fa210d14956d3c068a653e76a24e"

# Header-only: nothing to configure or build. Its users choose jsmn's
# settings (JSMN_STRICT, JSMN_PARENT_LINKS...) when they include it.
do_configure[noexec] = "1"
do_compile[noexec] = "1"

do_install() {
    install -d ${D}${includedir}
    install -m 0644 ${S}/jsmn.h ${D}${includedir}/jsmn.h
}

# The header goes to ${PN}-dev; the main package stays empty, and the -dev
# package must not ask for it.
ALLOW_EMPTY:${PN} = "1"
RDEPENDS:${PN}-dev = ""

BBCLASSEXTEND = "native nativesdk"
