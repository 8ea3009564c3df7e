"""The Test tab: any checkpoint of any generation speaks, side by side."""
