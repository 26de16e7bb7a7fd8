"""Shared test support: real coordinator processes and small HTTP helpers."""
