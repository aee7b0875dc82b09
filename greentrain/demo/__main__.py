"""``python -m greentrain.demo --zone GB``: find demo days on a shipped trace with the simulator."""

from greentrain.demo.scenario import main

main()
