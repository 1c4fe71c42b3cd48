"""What every launcher checks alike (rlsweep/launch/__init__.py)."""

import pytest

from rlsweep.errors import SpecError
from rlsweep.launch import AWS_REGION
from rlsweep.launch.ec2 import Ec2Cluster
from rlsweep.launch.sagemaker import SageMakerJob

REGIONS = {
    "us-east-1": True,
    "ap-southeast-2": True,
    "us-gov-west-1": True,
    "eu-central-12": True,
    "us-east-123": True,  # the shape of a name: AWS itself says which regions exist
    "useast1": False,
    "us east 1": False,
    "US-EAST-1": False,
    "us-east": False,
    "mars": False,
}


def _ec2(region: str) -> Ec2Cluster:
    return Ec2Cluster(
        cluster_name="c", image_id="ami-0123456789abcdef0", install="rlsweep==0.1.0", region=region
    )


def _sagemaker(region: str) -> SageMakerJob:
    return SageMakerJob(
        job_name="j",
        role_arn="arn:aws:iam::123456789012:role/r",
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/rlsweep:latest",
        instance_type="ml.c5.xlarge",
        checkpoint_s3_uri="s3://bucket/checkpoints",
        output_s3_uri="s3://bucket/output",
        source_s3_uri="s3://bucket/code/sourcedir.tar.gz",
        spec_path="search_spaces/demo.yaml",
        region=region,
    )


@pytest.mark.parametrize(("region", "ok"), REGIONS.items())
def test_every_launcher_takes_the_same_regions(region, ok):
    assert (AWS_REGION.fullmatch(region) is not None) is ok
    for launcher in (_ec2, _sagemaker):
        if ok:
            launcher(region)
        else:
            with pytest.raises(SpecError, match="region"):
                launcher(region)
