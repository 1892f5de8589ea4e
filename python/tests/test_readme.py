"""The Python examples of python/README.md run as written."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    namespace = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own documentation
    # the sign example: one voxel at r0, one sample k gives exp(+i k.r0) = exp(1j)
    assert abs(namespace["d"][0, 0] - np.exp(1j)) < 1e-5
    assert namespace["back"].shape == (namespace["nx"], namespace["ny"])
