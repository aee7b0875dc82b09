"""``python -m greentrain.exporters.dashboards OUT_DIR``: regenerate the dashboard JSON files."""

from __future__ import annotations

import sys

from greentrain.exporters.dashboards import write_dashboards

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m greentrain.exporters.dashboards OUT_DIR")
    for path in write_dashboards(sys.argv[1]):
        print(path)
