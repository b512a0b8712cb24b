"""hvd_dqn: data-parallel Deep Q-Networks with Horovod and TensorFlow-Keras.

The exact versions live in constraints.txt; this file names which of them the package needs at run time.
Horovod must be compiled against the installed TensorFlow, so install through scripts/setup.sh, which
builds it first (see README.md).
"""
import pathlib

from setuptools import find_packages, setup

RUNTIME_REQUIREMENTS = ("tensorflow", "tf-keras", "horovod", "numpy", "absl-py", "gymnasium", "ale-py", "matplotlib", "pillow",
                        "imageio", "imageio-ffmpeg", "pygame")


def pinned(names):
    """Returns `name==version` for each name, as pinned in constraints.txt."""
    pins = {}
    for line in (pathlib.Path(__file__).parent / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.strip().lower()] = f"{name.strip()}=={version.strip()}"
    return [pins[name] for name in names]


setup(
    name="hvd_dqn",
    version="0.2.0",
    license="Apache-2.0",
    description="Data-parallel Deep Q-Networks on Atari and classic control with Horovod and TensorFlow-Keras",
    long_description=(pathlib.Path(__file__).parent / "README.md").read_text(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["hvd_dqn", "hvd_dqn.*"]),
    python_requires=">=3.10,<3.13",
    install_requires=pinned(RUNTIME_REQUIREMENTS),
    # MinAtar (Young & Tian 2019) is GPL-3.0: an optional extra, so hvd_dqn's own licence terms do not change
    # for users who do not install it.
    extras_require={"minatar": pinned(("minatar",)),
                    # Object-store logdirs (s3://, gs://) through fsspec.
                    "cloud": pinned(("s3fs", "gcsfs", "fsspec")),
                    # Training on a Ray cluster (python -m hvd_dqn.ray_train) through horovod.ray.
                    "ray": pinned(("ray",)),
                    # Training on a Spark cluster (python -m hvd_dqn.spark_train) through horovod.spark.run.
                    "spark": pinned(("pyspark", "pyarrow"))},
    package_data={"hvd_dqn": ["baselines/*.json"]},
    entry_points={
        "console_scripts": [
            "hvd-dqn-train=hvd_dqn.train:run",
            "hvd-dqn-ray-train=hvd_dqn.ray_train:run",
            "hvd-dqn-spark-train=hvd_dqn.spark_train:run",
            "hvd-dqn-evaluate=hvd_dqn.evaluate:run",
            "hvd-dqn-export=hvd_dqn.export:run",
        ]
    },
)
