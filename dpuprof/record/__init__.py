"""The record stage: run a command, attach probes, write a Recording.

The only stage that imports bcc, and only lazily (``bcc_loader.import_bcc``), so ``project`` and
``report`` work where bcc is absent.
"""
