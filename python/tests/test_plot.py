"""horecon.plot.montage: titles with NRMSE, colour bars, a difference row, a saved PNG."""

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the [plot] extra (matplotlib) is not installed")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import horecon.plot  # noqa: E402


def test_montage_with_reference(tmp_path, rng):
    truth = rng.standard_normal((12, 10))
    a = truth + 0.1 * rng.standard_normal((12, 10))
    b = truth + 0.5 * rng.standard_normal((12, 10)) + 0j
    fig = horecon.plot.montage({"full model": a, "nominal": b}, reference=truth, reference_title="truth",
                               path=tmp_path / "m.png", suptitle="test")
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    nrmse_a = np.linalg.norm(a - truth) / np.linalg.norm(truth)
    assert titles[0] == "truth"
    assert titles[1] == f"full model\nNRMSE {nrmse_a:.3f}"
    assert titles[2].startswith("nominal\nNRMSE")
    assert "|full model - truth|" in titles and "|nominal - truth|" in titles
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert "|image|" in labels and "|difference|" in labels  # the two colour bars
    # images drawn with x to the right and y up: the panel shows the transpose, origin lower
    shown = fig.axes[1].images[0]
    np.testing.assert_allclose(shown.get_array(), np.abs(a).T)
    assert shown.origin == "lower"
    assert (tmp_path / "m.png").stat().st_size > 1000
    plt.close(fig)


def test_montage_without_reference_and_errors(rng):
    fig = horecon.plot.montage([rng.standard_normal((8, 8, 3)), rng.standard_normal((8, 8))], ["3-D", "2-D"])
    assert [ax.get_title() for ax in fig.axes[:2]] == ["3-D", "2-D"]
    plt.close(fig)
    # titles that are empty or not text, with a reference (its difference row once split them)
    fig = horecon.plot.montage({1: np.ones((4, 4)), 2: np.zeros((4, 4))}, reference=np.ones((4, 4)))
    plt.close(fig)
    fig = horecon.plot.montage([np.ones((4, 4))], [""], reference=np.ones((4, 4)))
    plt.close(fig)
    with pytest.raises(ValueError, match="2 images but 1 titles"):
        horecon.plot.montage([np.ones((4, 4))] * 2, ["one"])
    with pytest.raises(ValueError, match="shape"):
        horecon.plot.montage([np.ones((4, 4))], reference=np.ones((5, 4)))
