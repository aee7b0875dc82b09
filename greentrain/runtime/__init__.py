"""greentrain.runtime"""
