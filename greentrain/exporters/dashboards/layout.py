"""Where a board's panels go: ids and grid positions, the part grafana-foundation-sdk leaves to the caller.

Grafana's grid is 24 units wide. ``Grid`` numbers panels from 1 and places them
left to right in call order, starting a new row when the next panel would not
fit, so a board reads top to bottom as its code does; ``row`` starts a titled
row (Grafana's row panel, expanded) across the whole width. Every board (job,
node, fleet) lays itself out through this one class.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.extras import require

require("grafana_foundation_sdk", "the dashboard generator")
from grafana_foundation_sdk.builders import bargauge, stat, statetimeline, timeseries
from grafana_foundation_sdk.builders.dashboard import Dashboard, Row
from grafana_foundation_sdk.models.dashboard import GridPos

__all__ = ["GRID_WIDTH", "Grid", "Panel"]

GRID_WIDTH = 24
"""Grafana's grid width, in units."""

Panel = timeseries.Panel | stat.Panel | statetimeline.Panel | bargauge.Panel
"""The panel builders the boards use."""


@dataclass(slots=True)
class Grid:
    """Numbers panels and places them left to right in rows of ``GRID_WIDTH`` units, adding each to ``board``."""

    board: Dashboard
    x: int = 0
    y: int = 0
    row_h: int = 0
    next_id: int = 1

    def add(self, panel: Panel, w: int, h: int) -> None:
        """Put ``panel`` (``w`` units wide, ``h`` high) after the previous one, on a new row if it does not fit."""
        if self.x + w > GRID_WIDTH:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        self.board.with_panel(panel.id(self.next_id).grid_pos(GridPos(h=h, w=w, x=self.x, y=self.y)))
        self.next_id, self.x, self.row_h = self.next_id + 1, self.x + w, max(self.row_h, h)

    def row(self, title: str) -> None:
        """Start a row titled ``title`` below everything placed so far; the next panels go under it."""
        y = self.y + self.row_h
        self.board.with_row(Row(title).id(self.next_id).grid_pos(GridPos(h=1, w=GRID_WIDTH, x=0, y=y)))
        self.next_id, self.x, self.y, self.row_h = self.next_id + 1, 0, y + 1, 0
