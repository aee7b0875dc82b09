"""greentrain.monitor"""
