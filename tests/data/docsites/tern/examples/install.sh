python -m pip install "tern>=2.4"
tern --version
