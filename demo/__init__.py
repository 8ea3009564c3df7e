"""The demo workspace: tiny random models, synthetic data and the commands that train them, for every generation.

``python -m demo --out DIR`` builds it (``demo.workspace``). It sits above the product layers: it may import
networks/, data_tools/ and trainer/, and none of them imports it (webui/ and app.py may).
"""
