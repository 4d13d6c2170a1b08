"""Shared DRF plumbing: error shape, strict serializers, pagination, auth, size limit."""
