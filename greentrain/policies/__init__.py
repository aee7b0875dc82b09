"""greentrain.policies"""
