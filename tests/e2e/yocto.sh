#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Yocto recipes in packaging/yocto/, checked as far as this machine can
# without bitbake, for what bitbake on wrynose refused (issue 19,
# docs/design/testing.md):
# * no recipe assigns S (do_unpack fails since wrynose);
# * every file that `make install` and each other install-* target of the
#   Makefile install, with the paths the recipe passes in EXTRA_OEMAKE, is
#   shipped: a unit by SYSTEMD_SERVICE or a package's FILES, any other file
#   by a FILES of the recipe or bitbake.conf's default FILES of ${PN} and
#   ${PN}-doc (installed-vs-shipped is an error in wrynose's ERROR_QA);
# * every LIC_FILES_CHKSUM md5 matches the file: this tree's for the agent,
#   Debian's jsmn.h (byte for byte upstream v1.1.0's) for jsmn; jsmn's
#   LICENSE when JSMN_SRC names a checkout of it;
# * every DEPENDS entry has a recipe here or is one of the named recipes of
#   the layers packaging/yocto/README.md asks for.
# tests/run: once
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
command -v python3 >/dev/null || skip_all "python3 is not installed"
B=${HEALTHD_BUILD:-build}
[ -x "$B/dstack-healthd" ] || skip_all "$B/dstack-healthd is not built"
. tests/lib/scratch.sh

Y=${YOCTO_DIR:-packaging/yocto}
ls "$Y"/*.bb >/dev/null 2>&1
ok $? "recipes in $Y"

# recipe_py WHAT YOCTO_DIR ARGS...: reads the recipes (the program below).
read -r -d '' PY <<'PY'
import fnmatch, hashlib, os, re, sys

what, ydir = sys.argv[1], sys.argv[2]
args = sys.argv[3:]

# bitbake.conf's values on wrynose (usrmerge, as systemd requires there).
BBVARS = {
    "prefix": "/usr", "exec_prefix": "/usr", "base_prefix": "",
    "bindir": "/usr/bin", "sbindir": "/usr/sbin", "libdir": "/usr/lib",
    "libexecdir": "/usr/libexec", "includedir": "/usr/include",
    "datadir": "/usr/share", "sysconfdir": "/etc", "localstatedir": "/var",
    "sharedstatedir": "/com", "mandir": "/usr/share/man",
    "docdir": "/usr/share/doc", "infodir": "/usr/share/info",
    "nonarch_base_libdir": "/usr/lib", "base_libdir": "/usr/lib",
    "base_bindir": "/usr/bin", "base_sbindir": "/usr/sbin",
    "systemd_unitdir": "/usr/lib/systemd",
    "systemd_system_unitdir": "/usr/lib/systemd/system",
}
# The recipes of the layers the README asks for that DEPENDS may name.
LAYERS = {
    "openembedded-core": ["libmicrohttpd", "systemd", "zlib", "openssl"],
    "meta-oe": ["protobuf-c", "protobuf-c-native"],
    "meta-networking": ["mbedtls"],
}

def parse(path):
    """The recipe's assignments: (name, override, op, value) in order."""
    text = open(path).read()
    text = re.sub(r"\\\n", " ", text)
    out, infunc = [], False
    for line in text.splitlines():
        s = line.strip()
        if infunc:
            infunc = not s.startswith("}")
            continue
        if not s or s.startswith("#"):
            continue
        if re.match(r"^(python\s*\(\s*\)|[\w:-]+\s*\(\s*\))\s*\{", s) or s.startswith("python "):
            infunc = "}" not in s
            continue
        m = re.match(r'^(export\s+)?([A-Za-z_][\w-]*)((?::[^\s?+.=:]+|\[[^\]]*\])*)\s*(\?\?=|\?=|:=|\+=|=\+|\.=|=\.|=)\s*"(.*)"\s*$', s)
        if m:
            out.append((m.group(2), m.group(3), m.group(4), m.group(5)))
    return out

def values(assigns, name, override=None):
    """Every value given to name (any override when override is None)."""
    return [v for (n, o, op, v) in assigns if n == name and (override is None or o == override)]

def expand(v, local):
    def sub(m):
        k = m.group(1)
        if k in local:
            return local[k]
        if k in BBVARS:
            return BBVARS[k]
        raise KeyError(k)
    for _ in range(5):
        v2 = re.sub(r"\$\{([\w-]+)\}", sub, v)
        if v2 == v:
            break
        v = v2
    return v

recipes = sorted(f for f in os.listdir(ydir) if f.endswith(".bb") or f.endswith(".bbappend"))
def pn_of(f):
    return re.sub(r"(_[^_]*)?\.bb(append)?$", "", f)
here = {pn_of(f) for f in recipes if f.endswith(".bb")}

if what == "s":
    for f in recipes:
        bad = [v for v in values(parse(os.path.join(ydir, f)), "S")]
        print(("not ok" if bad else "ok") + f" {f}: no S assignment" +
              (f" (S = \"{bad[0]}\")" if bad else ""))

elif what == "lic":
    local = dict(a.split("=", 1) for a in args)
    for f in sorted(x for x in recipes if x.endswith(".bb")):
        a = parse(os.path.join(ydir, f))
        for v in values(a, "LIC_FILES_CHKSUM"):
            for uri in v.split():
                m = re.match(r"file://([^;]+)(.*)", uri)
                if not m:
                    print(f"not ok {f}: {uri} is not a file:// checksum")
                    continue
                name, params = m.group(1), dict(p.split("=", 1) for p in m.group(2).split(";") if "=" in p)
                src = local.get(f"{pn_of(f)}:{name}")
                if src is None or not os.path.exists(src):
                    print(f"{f}: {name} not checked here (no local copy of {pn_of(f)}'s source)")
                    continue
                lines = open(src, "rb").readlines()
                b, e = int(params.get("beginline", 1)), int(params.get("endline", len(lines)))
                got = hashlib.md5(b"".join(lines[b - 1:e])).hexdigest()
                want = params.get("md5", "")
                print(("ok" if got == want else "not ok") +
                      f" {f}: LIC_FILES_CHKSUM {name} md5 {want} matches {src}" +
                      ("" if got == want else f" (it is {got})"))

elif what == "deps":
    known = {d: l for l, ds in LAYERS.items() for d in ds}
    for f in sorted(x for x in recipes if x.endswith(".bb")):
        for v in values(parse(os.path.join(ydir, f)), "DEPENDS"):
            for d in v.split():
                if d in here or d.removesuffix("-native") in here:
                    print(f"ok {f}: DEPENDS {d}: a recipe in {ydir}")
                elif d in known:
                    print(f"ok {f}: DEPENDS {d}: {known[d]}")
                else:
                    print(f"not ok {f}: DEPENDS {d}: no recipe here nor in the named layers")

elif what == "make-args":
    # The install paths the recipe passes to make, expanded.
    a = parse(os.path.join(ydir, args[0]))
    pn = pn_of(args[0])
    local = {"PN": pn, "BPN": pn, "B": "/B", "D": "/D"}
    for v in values(a, "EXTRA_OEMAKE"):
        for m in re.finditer(r"\b([A-Z]+DIR|PREFIX)='([^']*)'", v):
            print(f"{m.group(1)}={expand(m.group(2), local)}")

elif what == "shipped":
    recipe, dest = args[0], args[1]
    a = parse(os.path.join(ydir, recipe))
    pn = pn_of(recipe)
    local = {"PN": pn, "BPN": pn}
    units = set()
    for v in values(a, "SYSTEMD_SERVICE"):
        units.update(expand(v, local).split())
    files = {}
    for (n, o, op, v) in a:
        if n == "FILES":
            files.setdefault(expand(o.lstrip(":"), local), []).extend(expand(v, local).split())
    # bitbake.conf's defaults for the packages every recipe has.
    defaults = {
        pn: ["/usr/bin/*", "/usr/sbin/*", "/usr/libexec/*", "/etc", "/com", "/var",
             f"/usr/share/{pn}", f"/usr/lib/{pn}/*"],
        f"{pn}-doc": ["/usr/share/doc", "/usr/share/man", "/usr/share/info",
                      "/usr/share/gnome/help", "/usr/share/help"],
    }
    def covered(path, pats):
        for p in pats:
            if fnmatch.fnmatchcase(path, p) or path.startswith(p.rstrip("/") + "/"):
                return True
        return False
    unitdir = BBVARS["systemd_system_unitdir"]
    n = 0
    for root, _, fs in os.walk(dest):
        for fn in sorted(fs):
            path = os.path.join(root, fn)[len(dest):]
            n += 1
            if path.startswith(unitdir + "/"):
                how = ("SYSTEMD_SERVICE" if fn in units else
                       next((f"FILES:{k}" for k, p in files.items() if covered(path, p)), None))
            else:
                how = next((f"FILES:{k}" for k, p in files.items() if covered(path, p)), None) or \
                      next((f"default FILES:{k}" for k, p in defaults.items() if covered(path, p)), None)
            print(("ok" if how else "not ok") + f" {recipe}: {path} is shipped" +
                  (f" ({how})" if how else " by no package (installed-vs-shipped)"))
    print(("ok" if n else "not ok") + f" {recipe}: make installed {n} files")
    # The other way round: do_package fails on a SYSTEMD_SERVICE not installed.
    for u in sorted(units):
        there = os.path.exists(dest + unitdir + "/" + u)
        print(("ok" if there else "not ok") + f" {recipe}: SYSTEMD_SERVICE {u} is installed")
PY
recipe_py() { python3 -c "$PY" "$@"; }

# check WHAT YOCTO_DIR ARGS...: recipe_py's verdict lines as test points.
check() {
	local line
	while IFS= read -r line; do
		case $line in
		"ok "*) ok 0 "${line#ok }" ;;
		"not ok "*) ok 1 "${line#not ok }" ;;
		*) diag "$line" ;;
		esac
	done < <(recipe_py "$@")
}

check s "$Y"
check lic "$Y" "dstack-healthd:LICENSE=LICENSE" "jsmn:jsmn.h=/usr/include/jsmn.h" \
	"jsmn:LICENSE=${JSMN_SRC:-/nonexistent}/LICENSE"
check deps "$Y"

# make install, and every other install-* target, as the recipe drives them.
mapfile -t margs < <(recipe_py make-args "$Y" dstack-healthd_git.bb)
diag "make install ${margs[*]}"
targets=$(sed -n 's/^\(install\(-[A-Za-z0-9_-]*\)\{0,1\}\):.*/\1/p' Makefile | sort -u)
rc=0
for tgt in $targets; do
	make --no-print-directory BUILD="$B" "${margs[@]}" DESTDIR="$T/d" "$tgt" >"$T/make-$tgt.log" 2>&1 ||
		{ rc=1; tail -n 5 "$T/make-$tgt.log" | sed 's/^/# /'; }
done
ok $rc "make $(echo $targets) DESTDIR=... with the recipe's paths"
check shipped "$Y" dstack-healthd_git.bb "$T/d"
done_testing
