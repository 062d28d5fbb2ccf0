"""The exchange benchmark (bench/exchange.py) and the Django settings, URLs and WSGI it serves."""
