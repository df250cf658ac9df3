"""`voicedesk doctor`: checks what VoiceDesk needs on this computer and says how to fix each problem."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.constants import DOWNLOAD_GB

OK, WARN, FAIL = "ok", "warn", "FAIL"
MIN_FREE_GB = 1.0
CUDA_TORCH_INDEX = "https://download.pytorch.org/whl/cu128"  # CUDA builds of PyTorch for Linux and Windows, RTX 50 too


@dataclass(frozen=True)
class SetupCheck:
    name: str
    status: str  # ok | warn | FAIL
    detail: str
    fix: str = ""


def check_python() -> SetupCheck:
    version = platform.python_version()
    if sys.version_info < (3, 10):
        return SetupCheck("Python", FAIL, version, "Install Python 3.10 or newer.")
    return SetupCheck("Python", OK, version)


def torch_has_kernels_for(capability: tuple[int, int], arch_list: list[str]) -> bool:
    """Whether a PyTorch built for `arch_list` (torch.cuda.get_arch_list(): "sm_86", "compute_90", ...) runs on a GPU
    of this compute capability: a cubin for sm_XY runs on X.Z for Z >= Y, PTX for compute_XY is compiled by the
    driver for any later GPU; arch-specific builds ("sm_90a") run on their own arch only."""
    for arch in arch_list:
        kind, _, number = arch.partition("_")
        digits = number.rstrip("af")
        if not digits.isdigit():
            continue
        built = divmod(int(digits), 10)
        if digits != number:  # sm_90a, sm_100f...: that arch alone
            if built == capability:
                return True
        elif kind == "sm" and built[0] == capability[0] and built[1] <= capability[1]:
            return True
        elif kind == "compute" and built <= capability:
            return True
    return False


def check_gpu() -> SetupCheck:
    try:
        import torch
    except ImportError:
        return SetupCheck("GPU", FAIL, "PyTorch is not installed", "pip install torch (Linux wheels include CUDA).")
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            reinstall = (f"pip install --force-reinstall torch --index-url {CUDA_TORCH_INDEX} (PyPI's Windows wheels "
                         "are CPU builds)" if sys.platform == "win32" else
                         "pip install --force-reinstall torch (the Linux wheels on PyPI are CUDA builds)")
            return SetupCheck("GPU", WARN, f"PyTorch {torch.__version__} is a CPU-only build: generation runs on the "
                         "CPU, far slower than real time", f"On a computer with an NVIDIA GPU: {reinstall}.")
        return SetupCheck("GPU", WARN, "No NVIDIA GPU is visible to PyTorch: generation runs on the CPU",
                     "Install the NVIDIA driver (nvidia-smi must list your GPU), then restart.")
    props = torch.cuda.get_device_properties(0)
    detail = (f"{props.name}, sm_{props.major}{props.minor}, {props.total_memory / 2**30:.1f} GiB, "
              f"CUDA {torch.version.cuda}")
    if not torch_has_kernels_for((props.major, props.minor), torch.cuda.get_arch_list()):
        return SetupCheck("GPU", FAIL, f"{detail}: this PyTorch ({torch.__version__}) has no kernels for "
                          f"sm_{props.major}{props.minor}, so every generation would fail",
                          "Install a PyTorch built for this GPU: pip install --upgrade --force-reinstall torch "
                          f"--index-url {CUDA_TORCH_INDEX} (RTX 50 cards need CUDA 12.8 or newer).")
    if props.total_memory < 4 * 2**30:
        return SetupCheck("GPU", WARN, detail + ": less than 4 GiB of memory",
                     "Close other GPU programs or use a larger GPU.")
    return SetupCheck("GPU", OK, detail)


def check_driver() -> SetupCheck:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return SetupCheck("NVIDIA driver", WARN, "nvidia-smi not found",
                     "Install the NVIDIA driver for your GPU (Ubuntu: sudo ubuntu-drivers install).")
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             check=False, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return SetupCheck("NVIDIA driver", WARN, f"nvidia-smi failed ({err})", "Reinstall the NVIDIA driver.")
    if out.returncode != 0 or not out.stdout.strip():
        return SetupCheck("NVIDIA driver", WARN, (out.stderr or out.stdout).strip()[:200] or "no GPU listed",
                     "Reinstall the NVIDIA driver, then reboot.")
    return SetupCheck("NVIDIA driver", OK, out.stdout.strip().splitlines()[0])


def check_ffmpeg() -> SetupCheck:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        return SetupCheck("ffmpeg", WARN, "not found: reference clips from phones and browsers (.m4a, .webm) cannot "
                     "be read, and Studio exports fail (their loudness is set with ffmpeg)",
                     "Install ffmpeg (Debian/Ubuntu: sudo apt-get install ffmpeg; macOS: brew install ffmpeg; "
                     "Windows: winget install ffmpeg) and restart.")
    try:
        version = subprocess.run([ffmpeg, "-version"], capture_output=True, check=False, text=True, timeout=20)
        first = version.stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired) as err:
        return SetupCheck("ffmpeg", WARN, f"{ffmpeg} does not run ({err})", "Reinstall ffmpeg.")
    return SetupCheck("ffmpeg", OK, first[0] if first else ffmpeg)


def check_speakers() -> SetupCheck:
    from .playback import probe

    status = probe()
    if not status.available:
        return SetupCheck("Speakers", WARN, status.reason,
                     "Optional. Install libportaudio2 (Debian/Ubuntu) and connect an output device.")
    default = next((d.name for d in status.devices if d.is_default), status.devices[0].name)
    return SetupCheck("Speakers", OK, f"{len(status.devices)} output device(s), default: {default}")


def check_model(model: str | None) -> SetupCheck:
    from engine.constants import HUB_ID
    from engine.errors import CheckpointError
    from engine.lm.checkpoint import ENV_VAR, validate_checkpoint

    source = model or os.environ.get(ENV_VAR) or HUB_ID
    folder = _model_folder(model)
    if folder is None:
        return SetupCheck("Model", WARN, f"{source} is not downloaded yet",
                     f"The first start downloads it (about {DOWNLOAD_GB} GB; needs the internet), "
                     f"or pass --model DIR / set {ENV_VAR}=DIR to use a copy you already have.")
    try:
        validate_checkpoint(folder)
    except CheckpointError as err:
        return SetupCheck("Model", FAIL, str(err).split(" Fix it")[0], "Download the model again, or pass --model DIR.")
    return SetupCheck("Model", OK, str(folder))


def _model_folder(model: str | None) -> Path | None:
    """The folder of the model the app would load, or None when it is not on this computer."""
    from engine.constants import HUB_ID
    from engine.lm.checkpoint import ENV_VAR

    source = model or os.environ.get(ENV_VAR) or HUB_ID
    folder = Path(source).expanduser()
    if folder.is_dir():
        return folder
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(source, local_files_only=True))
    except Exception:  # not in the local cache (huggingface_hub raises several kinds)
        return None


def check_realtime(model: str | None) -> SetupCheck:
    """The Realtime check's kept result for this model on this GPU (app/realtime_check.py)."""
    import torch

    from engine.lm.checkpoint import read_model_config
    from engine.lm.modes import device_label
    from engine.quant.realtime import checkpoint_fingerprint

    from .realtime_check import latest_for

    name = "Realtime check"
    if not torch.cuda.is_available():
        return SetupCheck(name, OK, "not needed: without an NVIDIA GPU, Realtime runs the same path as High fidelity")
    folder = _model_folder(model)
    if folder is None:
        return SetupCheck(name, OK, "not run yet: the model is not downloaded")
    if read_model_config(folder).demo:
        return SetupCheck(name, OK, "not run for the demo model (its output is noise)")
    device = device_label(torch.device("cuda"))
    found = latest_for(checkpoint_fingerprint(folder), device)
    if found is None:
        return SetupCheck(name, OK, f"not run yet: it runs the first time Realtime loads this model on the {device}")
    result, record = found
    when = f" ({record['key']['backend']}, {str(record.get('checked', ''))[:10]})"
    if result is None:
        return SetupCheck(name, WARN, f"the last check failed: {record['failed']}{when}",
                          "It runs again the next time Realtime loads this model; the app's terminal output has "
                          "the details.")
    if result.verdict == "fine":
        return SetupCheck(name, OK, result.summary() + when)
    return SetupCheck(name, WARN, f"Realtime drifts from High fidelity: {result.limits_crossed()}{when}",
                      "Choose High fidelity in the quality switch for the best quality (docs/realtime_check.md).")


def check_disk() -> SetupCheck:
    from .storage import AppDirs

    dirs = AppDirs.default()
    hf_home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    worst = None
    for folder in (dirs.data, hf_home):
        existing = next(p for p in (folder, *folder.parents) if p.exists())
        free_gb = shutil.disk_usage(existing).free / 2**30
        if worst is None or free_gb < worst[1]:
            worst = (folder, free_gb)
    folder, free_gb = worst
    detail = f"{free_gb:.1f} GB free at {folder}"
    if free_gb < MIN_FREE_GB:
        return SetupCheck("Disk space", FAIL, detail, "Free some disk space, or set VOICEDESK_HOME / HF_HOME to a "
                     "folder on a larger disk.")
    if free_gb < DOWNLOAD_GB + MIN_FREE_GB:
        return SetupCheck("Disk space", WARN, detail,
                          f"The model download needs about {DOWNLOAD_GB} GB: free some space.")
    return SetupCheck("Disk space", OK, detail)


def check_folders() -> SetupCheck:
    from .storage import AppDirs

    dirs = AppDirs.default()
    try:
        dirs.create()
        probe_file = dirs.data / ".write-test"
        probe_file.write_text("ok")
        probe_file.unlink()
    except OSError as err:
        return SetupCheck("App folders", FAIL, f"cannot write to {dirs.data} ({err})",
                     "Fix the folder's permissions, or set VOICEDESK_HOME to a writable folder.")
    return SetupCheck("App folders", OK, f"voices and history in {dirs.data}")


def check_gradio() -> SetupCheck:
    """The installed Gradio against the range this package asks for (pyproject.toml, the one home of it);
    read from the packages' metadata, so the doctor never imports Gradio itself."""
    from importlib.metadata import PackageNotFoundError, requires, version

    from packaging.requirements import Requirement

    try:
        wanted = next((r for r in map(Requirement, requires("voicedesk") or []) if r.name == "gradio"), None)
    except PackageNotFoundError:  # run from a checkout that was never installed
        wanted = None
    fix = f"pip install '{wanted}'" if wanted else "pip install gradio"
    try:
        installed = version("gradio")
    except PackageNotFoundError:
        return SetupCheck("Gradio", FAIL, "not installed", fix)
    if wanted is not None and not wanted.specifier.contains(installed, prereleases=True):
        return SetupCheck("Gradio", FAIL, f"{installed} (needs {wanted.specifier}: the app relies on this line of "
                     "releases, and older ones have known security holes)", fix)
    return SetupCheck("Gradio", OK, installed)


def check_kernels_name() -> SetupCheck:
    """Hugging Face's `kernels` distribution installs a top-level package named like VoiceDesk's `kernels/`: in one
    environment one hides the other (transformers 5.25 and newer require it; pyproject asks for an older one)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        clash = version("kernels")  # VoiceDesk's own kernels/ ships inside the voicedesk distribution
    except PackageNotFoundError:
        return SetupCheck("Package names", OK, "no other package named 'kernels'")
    return SetupCheck("Package names", FAIL, f"Hugging Face's 'kernels' {clash} is installed: its import name is that "
                      "of VoiceDesk's GPU kernels, and transformers imports one in place of the other",
                      "pip uninstall kernels, then install VoiceDesk again (it asks for a transformers that does "
                      "not need that package).")


def run_checks(model: str | None = None) -> list[SetupCheck]:
    checks: list[Callable[[], SetupCheck]] = [check_python, check_gpu, check_driver, check_ffmpeg, check_speakers,
                                         lambda: check_model(model), lambda: check_realtime(model), check_disk,
                                         check_folders, check_gradio, check_kernels_name]
    results = []
    for check in checks:
        try:
            results.append(check())
        except Exception as err:  # a broken check must not hide the others
            results.append(SetupCheck(getattr(check, "__name__", "check"), WARN, f"could not be checked ({err})"))
    return results


def run(model: str | None = None) -> int:
    """Print every check; exit code 1 when something required is broken, else 0."""
    results = run_checks(model)
    width = max(len(c.name) for c in results)
    for c in results:
        print(f"[{c.status:^4}] {c.name:<{width}}  {c.detail}")
        if c.fix and c.status != OK:
            print(f"       {'':<{width}}  fix: {c.fix}")
    failed = [c.name for c in results if c.status == FAIL]
    print("\nAll required checks passed." if not failed else f"\nNeeds fixing: {', '.join(failed)}.")
    return 1 if failed else 0
