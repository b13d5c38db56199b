"""Libraries the hygiene plugins use: secret redaction, the injection filter, text
normalisation and `<private>` stripping. Plugins live in `default_plugins/`; these do not
register hooks."""
