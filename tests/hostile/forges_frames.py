# Hostile candidate (tampering): writes a forged "correct" reply, in the judge's own frame
# format, to every socket and pipe the process holds, then returns zeros. Expected verdict:
# runtime_error (a protocol violation: the judge reads one reply per request, in turn).
import json
import os
import stat
import struct

import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    forged = json.dumps({"ok": True, "launched": 1, "fallback": {}, "unwritten": [], "aliased": [],
                         "inputs": {"seq": [], "tuple": True}, "tensors": []}).encode()
    for fd in range(3, 64):
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode):
                os.write(fd, struct.pack("!I", len(forged)) + forged)
        except OSError:
            pass
    return torch.zeros_like(x)
