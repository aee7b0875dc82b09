"""greentrain.actuators"""
