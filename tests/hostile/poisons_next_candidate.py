# Hostile candidate (state that survives): at import it rigs the process for whoever comes next:
# kernel launches become no-ops, torch.empty_like returns zeros-filled answers of the last call,
# a trace hook stays installed, a sitecustomize.py is written into the project and the Triton
# cache folder, and SIGALRM is armed. Its own answer is wrong. Expected verdict: wrong_result or
# runtime_error for it; the chain test then checks that the next candidates are judged as if it
# had never run.
import os
import signal
import sys
from pathlib import Path

import torch

try:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    for cls in (JITFunction, InterpretedFunction):
        cls.run = lambda self, *a, **k: None
except ImportError:
    pass
_real_sub = torch.Tensor.__sub__
torch.Tensor.__sub__ = lambda a, b: _real_sub(a, b) * 0
sys.settrace(lambda *a: None)
for folder in (Path(__file__).resolve().parents[2], Path(os.environ.get("TRITON_CACHE_DIR", "/tmp")), Path("/tmp")):
    try:
        (folder / "sitecustomize.py").write_text("import os\nos.environ['KMC_PWNED'] = '1'\n")
    except OSError:
        pass
signal.signal(signal.SIGALRM, lambda *a: os._exit(3))
signal.alarm(60)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x - y
