"""Embedded servers for a bare machine: PostgreSQL + pgvector and Valkey on 127.0.0.1."""
