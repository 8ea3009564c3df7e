"""The IndexTTS generations the studio knows: one registry entry each (see ``registry`` and ``spec``), and one
package each (indextts15/, indextts2/, indextts25/) holding the entry and that generation's own trainer code."""
