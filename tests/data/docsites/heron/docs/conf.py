# written for ragrade's tests: the Sphinx docs of an imaginary "heron" HTTP client
project = "Heron"
extensions = ["sphinx.ext.autodoc"]
templates_path = ["_templates"]
