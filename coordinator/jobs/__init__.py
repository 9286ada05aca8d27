"""Elastic training jobs: manifests, placement, policies and the component that reconciles each job's generations."""
