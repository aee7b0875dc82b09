"""The carbon-intensity providers: one module per source, and how they are found by name.

Live APIs (``electricitymaps``, ``watttime``, ``ukgrid``), a replayed CSV export
(``csvtrace``) and CodeCarbon's annual averages (``static``), each a
``CarbonIntensityProvider``; ``validate`` holds the checks every API answer passes,
``zones`` checks a zone name before a job starts, and ``registry`` builds any
provider (built-in or plugin) from a spec such as ``csv:GB_2022``. Nothing is
imported here: each module is loaded when it is named.
"""
