"""greentrain.signals"""
