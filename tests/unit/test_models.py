"""Model folders: a user's folder is used as it is, one without config.json is refused. The
bundled model's one-time conversion is tests/engine/test_model_conversion.py."""

import pytest

from specdec.models import ModelError, resolve_model


def test_user_folder_without_config_is_rejected(tmp_path):
    with pytest.raises(ModelError, match="no config.json"):
        resolve_model(tmp_path)


def test_user_folder_is_used_as_is(default_model_dir):
    assert resolve_model(str(default_model_dir)) == default_model_dir.resolve()
