"""greentrain.sim"""
