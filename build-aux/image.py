#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The sidecar's image (docs/app-developer.md, "The sidecar's image"),
without docker build.

  build-aux/image.py OUT AGENT

AGENT is the agent as `make` built it. OUT becomes an OCI image archive
(an OCI layout, tarred) that also holds the manifest.json that `docker load`
of Debian 12's docker.io reads; the manifest digest (what a registry shows
once the archive is pushed as it is) goes to stdout. OUT.d is left beside
it: the root, the layout and the lists, for whoever compares two builds.

The same inputs give the same bytes: every time is SOURCE_DATE_EPOCH (the
commit's), every owner is numeric, tar entries come in a sorted order in
the ustar format (no pax headers, so no access or change times), gzip -n
stores no name or time, and the JSON is written with fixed key order and
no blanks. Those inputs are the agent, the libraries ldd finds for it and
their packages' copyright files, the versions of the packages listed in
build-inputs (compiler, libraries, gzip), REV and COMMIT from the
environment.

Nothing but the agent: the binary, the libraries it loads and the dynamic
loader, their copyright files, build-inputs, and a passwd and group entry
for the user it runs as. No shell, no package manager.
"""
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

UID = GID = 65532  # "nonroot" in distroless images; no user of a stock guest
USER = "healthd"
# The packages whose versions decide the agent's bytes (with the compiler's
# and the libraries' own packages, found from their files) and the image's
# (gzip).
BUILD_PACKAGES = [
    "binutils", "gcc", "libc6-dev", "linux-libc-dev", "make", "pkgconf",
    "protobuf-c-compiler", "libjsmn-dev", "libmicrohttpd-dev",
    "libprotobuf-c-dev", "libmbedtls-dev", "libsystemd-dev", "gzip",
]
# The compiler's own files: its driver, cc1, libgcc and the linker.
COMPILER_FILES = ["-print-prog-name=cc1", "-print-libgcc-file-name", "-print-prog-name=ld"]
ENV = [
    # No gateway polls a sidecar: no public listener. The control socket
    # stays (docker exec ... dstack-healthd status), under the /run tmpfs.
    "DSTACK_HEALTHD_LISTEN=",
    "DSTACK_HEALTHD_VERDICT_FILE=/verdict/status",
    # On stop it asks the guest agent when it serves the file's unhealthy
    # (docs/app-developer.md: extra_hosts host.docker.internal:host-gateway).
    "DSTACK_HEALTHD_STOP_GUEST_AGENT=host.docker.internal:8090",
]
MEDIA = {
    "index": "application/vnd.oci.image.index.v1+json",
    "manifest": "application/vnd.oci.image.manifest.v1+json",
    "config": "application/vnd.oci.image.config.v1+json",
    "layer": "application/vnd.oci.image.layer.v1.tar+gzip",
}


def die(msg):
    sys.stderr.write("make image: %s\n" % msg)
    sys.exit(1)


def run(*argv):
    return subprocess.run(argv, check=True, stdout=subprocess.PIPE,
                          env=dict(os.environ, LC_ALL="C")).stdout.decode()


def libraries(agent):
    """The paths the loader opens for AGENT, as ldd names them, and the
    loader itself (the program interpreter)."""
    paths = []
    for line in run("ldd", agent).splitlines():
        m = re.match(r"\s*\S+ => (/\S+) \(", line) or re.match(r"\s*(/\S+) \(", line)
        if m:
            paths.append(m.group(1))
        elif "=>" in line and "not found" in line:
            die("ldd: " + line.strip())
    if not any("ld-linux" in p or "/ld-" in p for p in paths):
        die("ldd names no dynamic loader for " + agent)
    return sorted(set(paths))


def owners(paths):
    """The Debian package that owns each of PATHS, asked under each name
    usrmerge gives it (dpkg knows /lib/... where the file is /usr/lib/...),
    in one dpkg-query: each reads every package's file list."""
    names = {}
    for path in paths:
        real = os.path.realpath(path)
        n = [path, os.path.join(os.path.dirname(path), os.path.basename(real)), real]
        n += [x[4:] for x in n if x.startswith("/usr/")]
        n += ["/usr" + x for x in n if not x.startswith("/usr/")]
        names[path] = n
    r = subprocess.run(["dpkg-query", "-S"] + sorted({x for n in names.values() for x in n}),
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, LC_ALL="C"))
    found = {}
    for line in r.stdout.decode().splitlines():  # "libc6:amd64: /lib/..."
        pkgs, _, where = line.rpartition(": ")
        found.setdefault(where, pkgs.split(",")[0].strip())
    out = {}
    for path, n in names.items():
        owner = next((found[x] for x in n if x in found), None)
        if owner is None:
            die("no package owns %s (dpkg-query -S)" % path)
        out[path] = owner
    return out


def versions(pkgs, arch):
    """PKG VERSION a line; PKG of the build's architecture when it has one
    (a cross toolchain's other-architecture copies are not inputs)."""
    out = []
    for p in sorted(set(pkgs)):
        for q in ([p] if ":" in p else [p + ":" + arch, p]):
            r = subprocess.run(["dpkg-query", "-W", "-f", "${binary:Package} ${Version}\n", q],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                out.append(r.stdout.decode().strip())
                break
        else:
            out.append(p + " (not installed)")
    return out


def compiler_files():
    cc = os.environ.get("CC") or "cc"
    paths = [shutil.which(cc) or die("no compiler " + cc)]
    paths += [run(cc, opt).strip() for opt in COMPILER_FILES]
    return [shutil.which(p) or p for p in paths]


class Tree:
    """The image's files: path -> (mode, uid, bytes or None for a folder)."""

    def __init__(self):
        self.entries = {}

    def add_dir(self, path, mode=0o755, uid=0):
        if not path.strip("/"):
            return
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            self.entries.setdefault("/".join(parts[:i]), (0o755, 0, None))
        self.entries["/".join(parts)] = (mode, uid, None)

    def add_file(self, path, data, mode=0o644):
        self.add_dir(os.path.dirname(path))
        self.entries[path.strip("/")] = (mode, 0, data)

    def tar(self, epoch):
        """ustar, sorted by name, every time EPOCH, owners numeric."""
        buf = io.BytesIO()
        names = sorted(self.entries)
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for name in names:
                mode, uid, data = self.entries[name]
                ti = tarfile.TarInfo(name)
                ti.mode, ti.mtime, ti.uid, ti.gid = mode, epoch, uid, uid
                ti.uname = ti.gname = ""
                if data is None:
                    ti.type = tarfile.DIRTYPE
                    t.addfile(ti)
                else:
                    ti.size = len(data)
                    t.addfile(ti, io.BytesIO(data))
        return buf.getvalue()


def blob(layout, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with open(os.path.join(layout, "blobs", "sha256", digest[7:]), "wb") as f:
        f.write(data)
    return {"digest": digest, "size": len(data)}


def canonical(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def main():
    if len(sys.argv) != 3:
        die("usage: build-aux/image.py OUT AGENT")
    out, agent = sys.argv[1], sys.argv[2]
    try:
        epoch = int(os.environ["SOURCE_DATE_EPOCH"])
    except (KeyError, ValueError):
        die("SOURCE_DATE_EPOCH (the commit's time) is not set")
    rev, commit = os.environ.get("REV", ""), os.environ.get("COMMIT", "")
    version, tree_state = os.environ.get("VERSION", ""), os.environ.get("TREE", "")
    arch = run("dpkg", "--print-architecture").strip()
    if arch not in ("amd64", "arm64"):
        die("architecture %s: only amd64 and arm64 are known" % arch)

    t = Tree()
    with open(agent, "rb") as f:
        t.add_file("usr/sbin/dstack-healthd", f.read(), 0o755)
    libs, tools = libraries(agent), compiler_files()
    owner = owners(libs + tools)
    pkgs = [owner[lib] for lib in libs]
    for lib in libs:
        with open(lib, "rb") as f:  # the file itself, at the path ldd named
            t.add_file(lib, f.read(), 0o755)
    for p in sorted(set(q.split(":")[0] for q in pkgs)):
        with open("/usr/share/doc/%s/copyright" % p, "rb") as f:
            t.add_file("usr/share/doc/%s/copyright" % p, f.read())
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "LICENSE"), "rb") as f:
        t.add_file("usr/share/doc/dstack-healthd/copyright", f.read())
    inputs = ["rev " + rev, "commit " + commit, "tree " + tree_state,
              "arch " + arch] + versions(BUILD_PACKAGES + [owner[x] for x in tools] + pkgs, arch)
    t.add_file("usr/share/doc/dstack-healthd/build-inputs", ("\n".join(inputs) + "\n").encode())
    t.add_file("etc/passwd", ("root:x:0:0:root:/root:/usr/sbin/nologin\n"
                              "%s:x:%d:%d:dstack-healthd:/nonexistent:/usr/sbin/nologin\n"
                              % (USER, UID, GID)).encode())
    t.add_file("etc/group", ("root:x:0:\n%s:x:%d:\n" % (USER, GID)).encode())
    t.add_file("etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n")
    # The verdict's folder, the user's: a named volume mounted there takes
    # its owner and mode when Docker creates it (docs/app-developer.md).
    t.add_dir("verdict", 0o755, UID)
    # No /run: the tmpfs that covers it on a read-only root (for the control
    # socket) then starts 1777, and the agent makes its 0700 folder there.
    # Docker gives a tmpfs the mode of the image's folder, not its content.

    layer_tar = t.tar(epoch)
    r = subprocess.run(["gzip", "-n", "-9", "-c"], input=layer_tar, stdout=subprocess.PIPE,
                       check=True)
    layer_gz = r.stdout

    d = out + ".d"
    shutil.rmtree(d, ignore_errors=True)
    layout = os.path.join(d, "layout")
    os.makedirs(os.path.join(layout, "blobs", "sha256"))
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    labels = {"org.opencontainers.image.revision": commit,
              "org.opencontainers.image.version": version,
              "org.opencontainers.image.title": "dstack-healthd"}
    config = {
        "architecture": arch, "os": "linux", "created": created,
        "config": {"User": "%d:%d" % (UID, GID), "Env": ENV,
                   "Entrypoint": ["/usr/sbin/dstack-healthd"], "WorkingDir": "/",
                   "Labels": labels},
        "rootfs": {"type": "layers",
                   "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
        "history": [{"created": created, "created_by": "make image (build-aux/image.py)"}],
    }
    cfg = dict(blob(layout, canonical(config)), mediaType=MEDIA["config"])
    lay = dict(blob(layout, layer_gz), mediaType=MEDIA["layer"])
    manifest = {"schemaVersion": 2, "mediaType": MEDIA["manifest"],
                "config": {"mediaType": cfg["mediaType"], "digest": cfg["digest"], "size": cfg["size"]},
                "layers": [{"mediaType": lay["mediaType"], "digest": lay["digest"], "size": lay["size"]}]}
    man = blob(layout, canonical(manifest))
    tag = "dstack-healthd:" + (version or "latest")
    index = {"schemaVersion": 2, "mediaType": MEDIA["index"],
             "manifests": [{"mediaType": MEDIA["manifest"], "digest": man["digest"],
                            "size": man["size"],
                            "annotations": {"org.opencontainers.image.ref.name": tag}}]}
    with open(os.path.join(layout, "index.json"), "wb") as f:
        f.write(canonical(index))
    with open(os.path.join(layout, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))
    # What `docker load` reads (Debian 12's docker.io knows no OCI layout).
    with open(os.path.join(layout, "manifest.json"), "wb") as f:
        f.write(canonical([{"Config": "blobs/sha256/" + cfg["digest"][7:], "RepoTags": [tag],
                            "Layers": ["blobs/sha256/" + lay["digest"][7:]]}]))

    archive = Tree()
    for root, dirs, files in os.walk(layout):
        rel = os.path.relpath(root, layout)
        if rel != ".":
            archive.add_dir(rel)
        for n in files:
            with open(os.path.join(root, n), "rb") as f:
                archive.add_file(os.path.normpath(os.path.join(rel, n)), f.read())
    with open(out + ".tmp", "wb") as f:
        f.write(archive.tar(epoch))
    os.replace(out + ".tmp", out)
    # For the tests and verify-image: the file list and the root itself.
    with open(os.path.join(d, "files"), "w") as f:
        for name in sorted(t.entries):
            mode, uid, data = t.entries[name]
            f.write("%s %04o %d %s\n" % (name, mode, uid, "-" if data is None else len(data)))
    rootfs = os.path.join(d, "rootfs")
    for name in sorted(t.entries):
        mode, uid, data = t.entries[name]
        p = os.path.join(rootfs, name)
        if data is None:
            os.makedirs(p, exist_ok=True)
        else:
            with open(p, "wb") as f:
                f.write(data)
    with open(os.path.join(d, "config.json"), "wb") as f:
        f.write(canonical(config))
    print("unpacked %d bytes in %d files; layer %d bytes gzipped" % (
        sum(len(e[2]) for e in t.entries.values() if e[2] is not None),
        sum(1 for e in t.entries.values() if e[2] is not None), len(layer_gz)), file=sys.stderr)
    print(man["digest"])


main()
