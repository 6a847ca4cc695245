"""Test doubles for hardware boundaries (the fake pynvml module and the real nvidia-smi captures that script it)."""
