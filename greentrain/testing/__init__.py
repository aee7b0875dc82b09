"""greentrain.testing"""
