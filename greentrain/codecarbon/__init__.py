"""CodeCarbon's ``emissions.csv``: read the runs it recorded, and append rows in its format.

CodeCarbon writes one row per tracked run: when it stopped (``timestamp``,
local time without a zone), how long it ran (``duration``, seconds), the
energy (``energy_consumed``, kWh), the emissions it priced (``emissions``,
kg CO2eq) and where (``country_iso_code``, ``region``). The set of columns
changes between CodeCarbon versions, so both directions work by column name:
``reader`` takes what it needs from any version's file, ``writer`` appends a
row in the column set of the installed CodeCarbon (or of the file it appends
to). ``location`` maps between CodeCarbon's country and region and a grid
zone.
"""

from greentrain.codecarbon.columns import installed_columns
from greentrain.codecarbon.location import location_for, zone_for
from greentrain.codecarbon.reader import CodeCarbonRun, EmissionsFile, SkippedRow, read_emissions
from greentrain.codecarbon.writer import append_row, check_target

__all__ = ["CodeCarbonRun", "EmissionsFile", "SkippedRow", "append_row", "check_target", "installed_columns",
           "location_for", "read_emissions", "zone_for"]
