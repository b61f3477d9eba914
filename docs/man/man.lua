-- docs/man/man.lua - pandoc filter that makes edge's man pages from the
-- docs (scripts: the Makefile's man target). A page's source,
-- docs/man/NAME.SECTION.md, holds what only a man page has (NAME,
-- SYNOPSIS, SEE ALSO) and takes the rest from docs/*.md:
--
--   ::: {include="docs/edgectl.md"}         the whole file but its title
--   :::
--   ::: {include="docs/operations.md" section="Running edged"}
--   :::                                     one section, its heading left out
--
-- Headings move up one level (## is a man page's .SH, ### its .SS; .SH
-- titles in capitals), tables become tagged paragraphs (.TP: the first
-- column the tag, the others under it; tbl cannot fit the docs' wide
-- tables into 80 columns), and links inside the docs keep their text.

local function read_doc(path)
  local f = io.open(path, "r")
  if not f then
    error("man.lua: cannot read " .. path)
  end
  local text = f:read("a")
  f:close()
  return pandoc.read(text, "gfm").blocks
end

-- the blocks of the section titled name (its heading not included)
local function section(blocks, name, path)
  local out, level = pandoc.List(), nil
  for _, b in ipairs(blocks) do
    if level then
      if b.t == "Header" and b.level <= level then
        break
      end
      out:insert(b)
    elseif b.t == "Header" and pandoc.utils.stringify(b.content) == name then
      level = b.level
    end
  end
  if not level then
    error("man.lua: no section '" .. name .. "' in " .. path)
  end
  return out
end

local function include(div)
  local path = div.attributes["include"]
  if not path then
    return nil
  end
  local blocks = read_doc(path)
  local name = div.attributes["section"]
  if name then
    return section(blocks, name, path)
  end
  if blocks[1] and blocks[1].t == "Header" and blocks[1].level == 1 then
    blocks:remove(1)
  end
  return blocks
end

local function cell_inlines(cell)
  local out = pandoc.List()
  for _, b in ipairs(cell) do
    if b.content then
      if #out > 0 then
        out:insert(pandoc.Space())
      end
      out:extend(b.content)
    end
  end
  return out
end

local function table_to_list(tbl)
  local t = pandoc.utils.to_simple_table(tbl)
  local items = pandoc.List()
  for _, row in ipairs(t.rows) do
    local defs = pandoc.List()
    if #row == 2 then
      defs:insert(pandoc.Plain(cell_inlines(row[2])))
    else
      for j = 2, #row do
        local head = cell_inlines(t.headers[j] or {})
        local line = pandoc.List()
        if #head > 0 then
          line:insert(pandoc.Emph(head))
          line:insert(pandoc.Str(":"))
          line:insert(pandoc.Space())
        end
        line:extend(cell_inlines(row[j]))
        defs:insert(pandoc.Para(line))
      end
    end
    items:insert({cell_inlines(row[1]), {defs}})
  end
  return pandoc.DefinitionList(items)
end

local function upper(inlines)
  return pandoc.walk_inline(pandoc.Span(inlines), {
    Str = function(s)
      return pandoc.Str(pandoc.text.upper(s.text))
    end,
  }).content
end

local function header(h)
  h.level = h.level - 1
  if h.level < 1 then
    error("man.lua: a level-1 heading in a man page's source: use ##")
  end
  if h.level == 1 then
    h.content = upper(h.content)
  end
  return h
end

local function link(l)
  -- the docs' own links (#anchor, docs/x.md) say where in words already
  if l.target:match("^#") or not l.target:match("^%a+:") then
    return l.content
  end
  return nil
end

return {
  { Div = include },
  { Table = table_to_list, Header = header, Link = link },
}
