"""greentrain.device"""
