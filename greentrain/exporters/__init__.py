"""greentrain.exporters"""
