"""The conformance runner: fixture files in the reference schema, run through the kernel.

In reading order: ``schema`` (the shapes a file may take), ``values`` (fixture JSON to kernel
values), ``cases`` (kernel-function cases), ``traces`` (appraisal traces), ``runner`` (read,
check and run files, with an injected clock) and ``report`` (the outcome as text or JSON).
"""
