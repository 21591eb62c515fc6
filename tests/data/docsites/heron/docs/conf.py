# written for ragrade's tests: the Sphinx docs of an imaginary "heron" HTTP client
project = "Heron"
extensions = ["sphinx.ext.autodoc"]
templates_path = ["_templates"]
release = "2.4.1"
version = "2.4"
