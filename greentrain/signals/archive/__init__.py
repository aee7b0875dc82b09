"""The forecast archive: every provider forecast as it was issued, recorded, imported, replayed and scored.

``store`` is the SQLite file; ``recording`` writes to it without failing the
caller; ``longcsv`` and ``importers`` bring forecasts in from a CSV file or
WattTime's history; ``issued`` answers "what had the source said at that
moment?"; ``replay`` is the forecaster that replays an archive, weighed by
measured skill; ``chain`` is what a ``SignalChain`` records and blends;
``skillreport`` is ``greentrain carbon skill``. Nothing is imported here: each
module is loaded when it is named.
"""
