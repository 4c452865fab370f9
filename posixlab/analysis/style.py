"""One look for every figure (the POSIX and the classification ones): seaborn's ``paper`` context on a white grid,
the colour-blind-safe ``colorblind`` palette, and figure sizes in inches for an ACL-style page, so that a figure
placed at its natural width keeps its fonts at the sizes set here (7-8 pt, readable beside 10-11 pt text).

Every figure function calls ``apply_theme()`` before drawing; it is idempotent and only sets matplotlib's rcParams.
Every figure is made by ``figure()``: outside pyplot, on its own Agg canvas, so that drawing and saving it needs no
GUI and never reads or switches the backend of the process (a notebook keeps its inline backend).
"""

from __future__ import annotations

import logging
import re

import matplotlib
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties

COLUMN = 3.3  # inches: one column of an ACL-style two-column page
TWO_COLUMNS = 6.9  # inches: the full text width (a figure* spanning both columns)
PANEL_HEIGHT = 2.1  # inches: the height of one row of panels, labels included
DPI = 200  # PNG resolution: 1380 px across a two-column figure
FONT = 7.5  # points: axis labels, legends; tick labels one point smaller, titles half a point larger
N_BOOT = 1000  # bootstrap resamples for every interval seaborn draws (always with seed=SEED)
SEED = 0


class _QuietFontTimestamps(logging.Filter):
    """Drops fontTools' warning that the subset of a font embedded in a PDF has a low creation timestamp (matplotlib
    writes none, so every PDF would log it twice); fontTools' other messages pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "timestamp seems very low" not in record.getMessage()


_FONT_LOG = logging.getLogger("fontTools.ttLib.tables._h_e_a_d")


def apply_theme() -> None:
    """The theme: ``sns.set_theme(context="paper", style="whitegrid", palette="colorblind")`` with font sizes fixed
    for figures printed at ``COLUMN`` or ``TWO_COLUMNS`` wide, thin lines, TrueType fonts embedded in PDFs (editable
    text, as publishers ask) and a white background."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", rc={
        "font.size": FONT, "axes.labelsize": FONT, "axes.titlesize": FONT + 0.5, "figure.titlesize": FONT + 0.5,
        "xtick.labelsize": FONT - 1, "ytick.labelsize": FONT - 1, "legend.fontsize": FONT - 1,
        "legend.title_fontsize": FONT - 0.5, "axes.linewidth": 0.6, "grid.linewidth": 0.5, "lines.linewidth": 1.1,
        "lines.markersize": 3.5, "patch.linewidth": 0.6, "xtick.major.size": 2, "ytick.major.size": 2,
        "axes.titlepad": 3, "axes.labelpad": 2, "figure.dpi": 100, "savefig.dpi": DPI, "pdf.fonttype": 42,
        "figure.facecolor": "white", "savefig.facecolor": "white",
    })
    if not any(isinstance(f, _QuietFontTimestamps) for f in _FONT_LOG.filters):
        _FONT_LOG.addFilter(_QuietFontTimestamps())
    # under Hydra the root logger is at INFO: fontTools would log every step of subsetting a PDF's fonts (60 lines a
    # figure) and matplotlib every categorical axis whose labels look like numbers (prompt 0, 1, ...)
    for name in ("fontTools.subset", "matplotlib.category"):
        logging.getLogger(name).setLevel(logging.WARNING)


def figure(**kwargs) -> Figure:
    """A new figure for files: a ``matplotlib.figure.Figure`` (``kwargs``: ``figsize``, ``layout``, ...) on its own
    Agg canvas, which renders it to PNG and PDF (``fig.savefig``) whatever pyplot's backend is, without selecting that
    backend, opening a window or being shown by a notebook's inline backend unless displayed. Not registered with
    pyplot: nothing needs ``plt.close`` (``figures.save`` calls it all the same, for figures made with pyplot)."""
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)  # what pyplot's Agg backend attached: seaborn's forced draws (swarms, heatmaps) need one
    return fig


def palette(n: int) -> list:
    """The theme's colours, ``n`` of them (the colour-blind palette has 10; more repeat)."""
    return sns.color_palette("colorblind", n)


def width(panels: int, slots: int = 0) -> float:
    """One column for a figure of up to two small panels (``slots`` boxes or points across all panels, at most 6),
    the full text width otherwise."""
    return COLUMN if panels <= 2 and slots <= 6 else TWO_COLUMNS


def text_width(text: str, size: float = FONT) -> float:
    """The width in inches of ``text`` (its widest line) set at ``size`` points in the theme's font."""
    renderer = RendererAgg(10, 10, 72)  # 72 dpi: pixels are points
    font = FontProperties(family=matplotlib.rcParams["font.family"], size=size)
    return max(renderer.get_text_width_height_descent(line, font, ismath=False)[0] for line in text.split("\n")) / 72


def wrap(text: str, inches: float, size: float = FONT + 0.5, hyphens: bool = False) -> str:
    """``text`` with each of its lines broken between words (and after hyphens, with ``hyphens``) so that no line is
    wider than ``inches`` at ``size`` points, as measured by matplotlib; a single word wider than that stays whole."""
    out = []
    for line in text.split("\n"):
        pieces = re.findall(r"[^-\s]*-|\S+", line) if hyphens else line.split()
        current = ""
        for piece in pieces:
            glue = "" if current.endswith("-") or not current else " "
            if current and text_width(current + glue + piece, size) > inches:
                out.append(current)
                current = piece
            else:
                current += glue + piece
        out.append(current)
    return "\n".join(out)


def legend_below(fig, ax, **kwargs) -> None:
    """The legend seaborn drew on ``ax`` (hue and style entries), moved under the figure, where a figure made with
    ``layout="constrained"`` makes room for it; ``kwargs`` go to ``fig.legend`` (``ncols``, ``markerscale``)."""
    legend = ax.get_legend()
    if legend is None:
        return
    handles, labels = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
    legend.remove()
    fig.legend(handles, labels, loc="outside lower center", frameon=False, **kwargs)
