"""The node tier's images, built from the project's own files with buildah and cached by content.

Five images, each an OCI archive that the node's containerd imports (``Node.import_image``):

- ``pause`` (``localhost/berth-node-pause:1``): the pod sandbox, ``FROM scratch`` with Debian's static busybox,
  whose entrypoint sleeps forever;
- ``runtime`` and ``analytics`` (``berth:0.1.0``, ``berth-analytics:0.1.0``, the names the chart uses by default):
  the Dockerfile's two targets, built with ``--build-arg PYTHON_IMAGE=`` a base image made here from Debian packages
  (``debootstrap --variant=minbase`` with Python, no registry image can be pulled);
- ``examples`` (``berth-examples:0.1.0``): ``deploy/examples/consumers/Dockerfile`` on the same base, the example
  Kafka consumers with their clients installed;
- ``etcd`` (``localhost/berth-etcd:bookworm``): ``node_etcd/Dockerfile``, Debian's ``etcd-server`` on the same
  base, as UID 10001 owning ``/var/lib/etcd``, for the chart's ``coordinator.ha.etcd.image``.

Each archive is named by a key over exactly its inputs (the base: Debian suite, package list, mirror, this
machine's CA bundle and apt settings; a target: the base's key, the Dockerfile, and every file of the build context
that ``.dockerignore``, read as Docker reads it, lets in), so a second run finds the archives and builds nothing.
The cache lives in ``$BERTH_NODE_CACHE`` (default ``~/.cache/berth-node``), shared by every checkout on the machine,
under a lock, and stays bounded: the three archives of each image used last (and any used in the last hour, which
another run may be importing) are kept, and after every run
(:meth:`Builder.tidy`) buildah's store keeps only the base and the images of the current keys with the intermediate
images they are built on (``--layers``: a changed source file rebuilds only the stages after its COPY); every
working container, other keys' images and the layers only they used are removed (about 2 GB of store and 3 GB of
archives, where the store alone had grown to 11 GB).

``python -m support.node_images MANIFEST`` (``PYTHONPATH=tests``) builds all five and writes ``{name: {"ref",
"archive"}}`` to MANIFEST: the node tier starts it in the background when the session starts
(``support.node_fixtures``), so the rest of the suite runs meanwhile.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"
EXAMPLES_DIR = REPO / "deploy" / "examples" / "consumers"
SUITE = "bookworm"
#: The base image's Debian packages: Python with venv and pip (the Dockerfile's stages use `python`, `pip` and
#: `python -m venv`), and the CA certificates pip verifies against.
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "ca-certificates")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HOST_APT_CONF = Path("/etc/apt/apt.conf.d")
BUSYBOX = Path("/bin/busybox")
#: Bumped when the way an image is made changes (not its inputs).
RECIPE = "2"

PAUSE_REF = "localhost/berth-node-pause:1"
ETCD_DIR = Path(__file__).resolve().parent / "node_etcd"
ETCD_REPOSITORY, ETCD_TAG = "localhost/berth-etcd", "bookworm"


@dataclass(frozen=True)
class Recipe:
    """One image: its reference in containerd, its Dockerfile (whose directory is the build context), its target,
    and the build argument that receives the Debian base's reference."""

    ref: str
    dockerfile: Path
    target: str | None
    base_arg: str = "PYTHON_IMAGE"


IMAGES = {
    "runtime": Recipe("docker.io/library/berth:0.1.0", DOCKERFILE, "runtime"),
    "analytics": Recipe("docker.io/library/berth-analytics:0.1.0", DOCKERFILE, "analytics"),
    "examples": Recipe("docker.io/library/berth-examples:0.1.0", EXAMPLES_DIR / "Dockerfile", None),
    "etcd": Recipe(f"{ETCD_REPOSITORY}:{ETCD_TAG}", ETCD_DIR / "Dockerfile", None, base_arg="BASE_IMAGE"),
}
TOOLS = ("buildah", "debootstrap")
#: Archives kept per image (the ones used last); buildah's layers stay too, so an older one rebuilds quickly.
KEEP = 3
#: An archive used this recently (seconds) may be about to be imported by another run: never pruned.
RECENT_S = 3600.0


def cache_dir() -> Path:
    return Path(os.environ.get("BERTH_NODE_CACHE") or Path.home() / ".cache" / "berth-node")


def missing_tools() -> list[str]:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists()]
    if not BUSYBOX.is_file():
        missing.append("busybox-static")
    return missing


def _digest(*parts: bytes | str) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return hasher.hexdigest()[:20]


def debian_mirror() -> str:
    """This machine's Debian mirror (its deb822 or one-line sources), else deb.debian.org."""
    for path in [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1 and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"] and len(words) > 2 and "security" not in words[-2]:
                return next(w for w in words[1:] if "://" in w)
    return "http://deb.debian.org/debian"


def _apt_settings() -> list[Path]:
    return sorted(p for p in HOST_APT_CONF.glob("*") if p.is_file()) if HOST_APT_CONF.is_dir() else []


def base_key() -> str:
    parts: list[bytes | str] = [RECIPE, SUITE, " ".join(BASE_PACKAGES), debian_mirror(), HOST_CA_BUNDLE.read_bytes()]
    for path in _apt_settings():
        parts += [path.name, path.read_bytes()]
    return _digest(*parts)


def _pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker reads it: relative to the context's root, ``*`` and ``?`` within one path
    element, ``**`` across any number of them."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 1 :]:
            close = pattern.index("]", i + 1)
            out, i = out + "[" + pattern[i + 1 : close].replace("!", "^", 1) + "]", close + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _ignored(relative: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether .dockerignore keeps ``relative`` out of the context: the last pattern that matches it or one of its
    parent directories decides (an exclusion, or a ``!`` re-inclusion)."""
    names = [relative] + [relative[:i] for i, c in enumerate(relative) if c == "/"]
    excluded = False
    for negated, regex in patterns:
        if any(regex.fullmatch(name) for name in names):
            excluded = not negated
    return excluded


def context_files(root: Path) -> Iterator[Path]:
    """The files a build of ``root`` sends to the builder, after .dockerignore."""
    ignore = root / ".dockerignore"
    lines = [line.strip() for line in (ignore.read_text().splitlines() if ignore.is_file() else [])]
    texts = [line for line in lines if line and not line.startswith("#")]
    patterns = [(text.startswith("!"), _pattern(text.removeprefix("!").strip("/"))) for text in texts]
    # Directories left out whole unless a "!" pattern could let something under them back in: the repository's
    # .venv, .git and caches are tens of thousands of files.
    back_in = [text[1:].strip("/") for text in texts if text.startswith("!")]

    def may_hold_back_in(relative: str) -> bool:
        return any(any(c in b.split("/", 1)[0] for c in "*?[") or b.startswith(relative + "/") for b in back_in)

    found = []
    for directory, subdirectories, files in os.walk(root):
        here = Path(directory)
        subdirectories[:] = [
            name
            for name in subdirectories
            if not _ignored(rel := (here / name).relative_to(root).as_posix(), patterns) or may_hold_back_in(rel)
        ]
        found += [here / name for name in files if not _ignored((here / name).relative_to(root).as_posix(), patterns)]
    yield from sorted(found)


def target_key(dockerfile: Path, target: str | None, base: str) -> str:
    root = dockerfile.parent
    parts: list[bytes | str] = [RECIPE, base, target or "", dockerfile.read_bytes()]
    for path in context_files(root):
        parts += [path.relative_to(root).as_posix(), path.read_bytes()]
    return _digest(*parts)


@dataclass
class Builder:
    cache: Path
    log: Path
    _keys: dict[str, str] = field(default_factory=dict, init=False)

    @property
    def archives(self) -> Path:
        return self.cache / "archives"

    def _run(self, *argv: str | Path, stdin: int | None = None) -> None:
        with self.log.open("ab") as log:
            log.write(f"\n$ {' '.join(map(str, argv))}\n".encode())
            log.flush()
            result = subprocess.run([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT, stdin=stdin)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, argv[:4]))} ... exited {result.returncode}: see {self.log}")

    def _buildah_argv(self, *args: str | Path) -> list[str]:
        store = self.cache / "buildah"
        common = ["buildah", "--root", store / "root", "--runroot", store / "run", "--storage-driver", "overlay"]
        return [str(a) for a in (*common, *args)]

    def buildah(self, *args: str | Path) -> None:
        self._run(*self._buildah_argv(*args))

    def buildah_out(self, *args: str) -> str:
        return subprocess.run(self._buildah_argv(*args), capture_output=True, text=True, check=True).stdout.strip()

    def has_image(self, ref: str) -> bool:
        found = subprocess.run(self._buildah_argv("inspect", "--type", "image", ref), capture_output=True)
        return found.returncode == 0

    def _commit_rootfs(self, rootfs_tar: Path, ref: str, *config: str) -> None:
        container = self.buildah_out("from", "scratch")
        try:
            self.buildah("add", container, rootfs_tar, "/")
            if config:
                self.buildah("config", *config, container)
            self.buildah("commit", "-q", container, ref)
        finally:
            self.buildah("rm", container)

    def _push(self, ref: str, archive: Path) -> None:
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        self.buildah("push", "-q", ref, f"oci-archive:{partial}:{ref}")
        partial.rename(archive)
        self._prune(archive)

    def _hit(self, archive: Path) -> bool:
        """Whether the archive is cached (then marked used now, for :meth:`_prune`)."""
        if not archive.exists():
            return False
        os.utime(archive)
        return True

    def _prune(self, archive: Path, keep: int = KEEP) -> None:
        """Of one image's archives, keep the ``keep`` used last (checkouts of other branches share the cache), and
        any used in the last ``RECENT_S``: a run that built or found one imports it after releasing the lock."""
        name = archive.name.rsplit("-", 1)[0]
        same = sorted(self.archives.glob(f"{name}-*.tar"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in same[keep:]:
            with contextlib.suppress(OSError):
                if time.time() - old.stat().st_mtime > RECENT_S:
                    old.unlink()

    def tidy(self, keep: set[str]) -> None:
        """Remove what builds leave in buildah's store: every working container (an interrupted build leaves its
        own), every image not named in ``keep`` (other keys' bases and images, older tags), then the intermediate
        images nothing kept is built on. The kept images' own intermediate images stay: ``--layers`` reuses them,
        so a changed source file still rebuilds only the stages after its COPY. Old base root filesystems go too."""
        self.buildah("rm", "--all")
        listed = json.loads(self.buildah_out("images", "--json") or "[]")
        for name in sorted({n for image in listed for n in image.get("names") or []} - keep):
            # An image with another name kept only loses this name; one with children stays until they are gone.
            subprocess.run(self._buildah_argv("rmi", name), capture_output=True)
        count = -1
        while count != (count := self._image_count()):  # each pass frees the parents of what the last one removed
            subprocess.run(self._buildah_argv("rmi", "--prune"), capture_output=True)
        base = f"base-rootfs-{base_key()}.tar"
        for rootfs in self.archives.glob("base-rootfs-*.tar"):
            if rootfs.name != base:
                rootfs.unlink(missing_ok=True)

    def _image_count(self) -> int:
        return len(json.loads(self.buildah_out("images", "--all", "--json") or "[]"))

    def pause(self) -> Path:
        key = _digest(RECIPE, BUSYBOX.read_bytes())
        archive = self.archives / f"pause-{key}.tar"
        if self._hit(archive):
            return archive
        with tempfile.TemporaryDirectory(dir=self.cache) as scratch:
            rootfs = Path(scratch) / "rootfs"
            (rootfs / "bin").mkdir(parents=True)
            shutil.copy2(BUSYBOX, rootfs / "bin" / "busybox")
            subprocess.run(["tar", "-C", rootfs, "-cf", Path(scratch) / "rootfs.tar", "."], check=True)
            self._commit_rootfs(
                Path(scratch) / "rootfs.tar", PAUSE_REF, "--entrypoint", '["/bin/busybox", "sleep", "2147483647"]'
            )
        self._push(PAUSE_REF, archive)
        return archive

    def base(self) -> str:
        """The base image from Debian packages, in buildah's storage; its reference."""
        key = base_key()
        ref = f"localhost/berth-base:{key}"
        if self.has_image(ref):
            return ref
        rootfs_tar = self.archives / f"base-rootfs-{key}.tar"
        if not rootfs_tar.exists():
            with tempfile.TemporaryDirectory(dir=self.cache) as scratch:
                rootfs = Path(scratch) / "rootfs"
                include = ",".join(BASE_PACKAGES)
                self._run("debootstrap", "--variant=minbase", f"--include={include}", SUITE, rootfs, debian_mirror())
                # pip verifies TLS against this machine's CA bundle (the registries are reached through it), and
                # apt inside a build uses this machine's apt settings for the same mirror.
                shutil.copy2(HOST_CA_BUNDLE, rootfs / "etc" / "ssl" / "certs" / "ca-certificates.crt")
                for path in _apt_settings():
                    shutil.copy2(path, rootfs / "etc" / "apt" / "apt.conf.d" / path.name)
                for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
                    for item in (rootfs / leftover).glob("*"):
                        if item.is_file():
                            item.unlink()
                self._run("tar", "-C", rootfs, "-cf", rootfs_tar.with_suffix(".partial"), ".")
                rootfs_tar.with_suffix(".partial").rename(rootfs_tar)
        self._commit_rootfs(
            rootfs_tar,
            ref,
            "--env",
            "LANG=C.UTF-8",
            "--env",
            f"PIP_CERT={HOST_CA_BUNDLE}",
            "--cmd",
            "python3",
        )
        return ref

    def key(self, name: str) -> str:
        if name not in self._keys:
            recipe = IMAGES[name]
            self._keys[name] = target_key(recipe.dockerfile, recipe.target, base_key())
        return self._keys[name]

    def local_ref(self, name: str) -> str:
        """The image's name in buildah's store: by its key, so that the store can tell current from stale."""
        return f"localhost/berth-node-{name}:{self.key(name)}"

    def image(self, name: str) -> tuple[str, Path]:
        recipe = IMAGES[name]
        key = self.key(name)
        archive = self.archives / f"{name}-{key}.tar"
        if self._hit(archive):
            return recipe.ref, archive
        base_ref = self.base()
        local = self.local_ref(name)
        args = ["bud", "--layers", "--pull=false", "--network", "host", "--isolation", "chroot"]
        args += ["--build-arg", f"{recipe.base_arg}={base_ref}", "-f", str(recipe.dockerfile), "-t", local]
        if recipe.target:
            args += ["--target", recipe.target]
        self.buildah(*args, recipe.dockerfile.parent)
        self.buildah("tag", local, recipe.ref)
        self._push(recipe.ref, archive)
        return recipe.ref, archive


@contextmanager
def locked(cache: Path) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_all(log: Path, names: tuple[str, ...] = tuple(IMAGES)) -> dict[str, dict[str, str | float]]:
    cache = cache_dir()
    with locked(cache):
        builder = Builder(cache, log)
        builder.archives.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        built: dict[str, dict[str, str | float]] = {
            "pause": {"ref": PAUSE_REF, "archive": str(builder.pause()), "seconds": time.monotonic() - started}
        }
        for name in names:
            started = time.monotonic()
            ref, archive = builder.image(name)
            built[name] = {"ref": ref, "archive": str(archive), "seconds": round(time.monotonic() - started, 1)}
        started = time.monotonic()
        builder.tidy({PAUSE_REF, f"localhost/berth-base:{base_key()}"} | {builder.local_ref(name) for name in names})
        built["pause"]["tidy_seconds"] = round(time.monotonic() - started, 1)
    return built


def main(argv: list[str]) -> int:
    manifest = Path(argv[0])
    log = manifest.with_suffix(".log")
    try:
        result: dict[str, object] = {"images": build_all(log)}
    except Exception as error:  # the fixture reports it with the log's tail
        result = {"error": f"{type(error).__name__}: {error}"}
    manifest.with_suffix(".partial").write_text(json.dumps(result, indent=2))
    manifest.with_suffix(".partial").rename(manifest)
    return 0 if "images" in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
