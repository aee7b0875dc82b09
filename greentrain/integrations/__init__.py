"""greentrain.integrations"""
