"""py-spy (optional, ``--profile``): where the gunicorn workers' time goes during (b), (c), (e)."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.throughput.servers import Server


@contextmanager
def profiled(server: Server, spy: str | None, out_dir: Path | None, name: str) -> Iterator[None]:
    """Record every gunicorn worker with py-spy while the block runs (raw collapsed stacks)."""
    if spy is None or out_dir is None:
        yield
        return
    recorders = [
        subprocess.Popen(
            [
                spy,
                "record",
                "--pid",
                str(worker.pid),
                "--rate",
                "200",
                "--format",
                "raw",
                "--nonblocking",
                "--gil",
                "--output",
                str(out_dir / f"{name}-{worker.pid}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for worker in server.workers()
    ]
    try:
        yield
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)
        for recorder in recorders:
            try:
                recorder.wait(timeout=30)
            except subprocess.TimeoutExpired:
                recorder.kill()


def profile_summary(out_dir: Path, name: str, top: int = 25) -> str:
    """Inclusive share of samples per function over the workers' stacks of one phase."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for path in sorted(out_dir.glob(f"{name}-*.txt")):
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [frame for frame in stack.split(";") if not frame.startswith("process ")]
            frames = [re.sub(r":\d+\)$", ")", frame) for frame in frames]
            total += count
            for frame in set(frames):
                inclusive[frame] = inclusive.get(frame, 0) + count
            if frames:
                own[frames[-1]] = own.get(frames[-1], 0) + count
    if not total:
        return f"{name}: no samples"
    lines = [f"{name}: {total} samples over the workers' active threads"]
    lines.append("  inclusive:")
    for frame, count in sorted(inclusive.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"    {100 * count / total:5.1f}%  {frame}")
    lines.append("  self:")
    for frame, count in sorted(own.items(), key=lambda item: -item[1])[:15]:
        lines.append(f"    {100 * count / total:5.1f}%  {frame}")
    return "\n".join(lines)
