"""horecon.plot: labelled figures of reconstructions (matplotlib; ``pip install horecon[plot]``).

:func:`montage` puts images side by side with their titles, one shared colour bar, and, given a
reference, each panel's NRMSE and a row of differences to the reference with a colour bar of
its own.
"""

from __future__ import annotations

import numpy as np

__all__ = ["montage"]


def _plane(name, image, slice_index):
    """A 2-D magnitude plane [x, y] of an image indexed [x, y(, z)] (the middle z by default)."""
    arr = np.asarray(image)
    if arr.ndim == 3:
        arr = arr[:, :, arr.shape[2] // 2 if slice_index is None else slice_index]
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected an image indexed [x, y] or [x, y, z], got shape {np.shape(image)}")
    return arr


def montage(
    images,
    titles=None,
    *,
    reference=None,
    reference_title: str = "reference",
    difference: bool = True,
    difference_scale: float | None = None,
    slice_index: int | None = None,
    cmap: str = "gray",
    difference_cmap: str = "magma",
    panel_size: float = 2.6,
    suptitle: str | None = None,
    path=None,
    dpi: int = 120,
):
    """A figure of images (magnitudes), indexed [x, y] or [x, y, z] like horecon's images, drawn
    with x to the right and y up.

    Parameters
    ----------
    images : a list of arrays, or a dict {title: array}.
    titles : the panels' titles (a list; ignored for a dict).
    reference : the truth: shown first, each title gets its NRMSE ||x - ref|| / ||ref||, and with
        ``difference`` a second row shows |x - ref| on one colour scale (``difference_scale``:
        its maximum, default the largest difference).
    slice_index : the z index of 3-D images (default the middle).
    path : save the figure there (PNG, PDF, SVG by extension) as well.

    Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    if isinstance(images, dict):
        titles, images = list(images.keys()), list(images.values())
    images = [_plane(f"images[{i}]", im, slice_index) for i, im in enumerate(images)]
    if not images:
        raise ValueError("montage: no images")
    titles = [str(t) for t in titles] if titles is not None else [f"image {i + 1}" for i in range(len(images))]
    if len(titles) != len(images):
        raise ValueError(f"montage: {len(images)} images but {len(titles)} titles")
    ref = None if reference is None else _plane("reference", reference, slice_index)
    for i, im in enumerate(images):
        if ref is not None and im.shape != ref.shape:
            raise ValueError(f"montage: images[{i}] has shape {im.shape}, the reference {ref.shape}")
    panels = ([ref] if ref is not None else []) + images
    labels = ([reference_title] if ref is not None else []) + [
        t if ref is None else f"{t}\nNRMSE {np.linalg.norm(im - ref) / max(np.linalg.norm(ref), 1e-30):.3f}"
        for t, im in zip(titles, images)
    ]
    rows = 2 if (ref is not None and difference) else 1
    cols = len(panels)
    fig, axes = plt.subplots(
        rows, cols, figsize=(panel_size * cols + 1.2, panel_size * rows + 0.9), squeeze=False, constrained_layout=True
    )
    vmax = max(float(np.abs(p).max()) for p in panels) or 1.0
    shown = None
    for ax, p, label in zip(axes[0], panels, labels):
        shown = ax.imshow(np.abs(p).T, origin="lower", cmap=cmap, vmin=0, vmax=vmax, interpolation="nearest")
        ax.set_title(label, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(shown, ax=list(axes[0]), shrink=0.9, label="|image|")
    if rows == 2:
        diffs = [np.abs(im - ref) for im in images]
        dmax = difference_scale or max(float(d.max()) for d in diffs) or 1.0
        axes[1][0].axis("off")
        axes[1][0].text(0.5, 0.5, "difference to\n" + reference_title, ha="center", va="center", fontsize=9)
        for ax, d, t in zip(axes[1][1:], diffs, titles):
            shown = ax.imshow(d.T, origin="lower", cmap=difference_cmap, vmin=0, vmax=dmax, interpolation="nearest")
            ax.set_title(f"|{(t.splitlines() or [''])[0]} - {reference_title}|", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        fig.colorbar(shown, ax=list(axes[1]), shrink=0.9, label="|difference|")
    if suptitle:
        fig.suptitle(suptitle)
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig
